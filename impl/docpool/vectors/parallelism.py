"""How many cores one vector query's embedding may use.

Embedding the query (ONNX Runtime) splits over intra-op threads that release the GIL: in one
process on a quiet 2-core host two threads took it from 6.7 to 5.0 ms. Through the server one
thread is the default: alternated call by call against two (``benchmarks/docpool_vector_ab.py``,
five runs at load 1-2.7), its vector p50 was never worse (17.9 vs 19.0 ms in the last) and it
used 1.3-3.5 ms less CPU per call, CPU the server's other calls and workers share. Ranking does
not split either: the int8 scan runs on the calling thread (``int8_scan``).

``KNOWSPEC_VECTOR_THREADS`` (read once into the runtime's settings) sets the count (e.g. 2 on a
host that serves one caller at a time on idle cores). The results do not depend on it:
embeddings are bit-identical.
"""

from __future__ import annotations

import os

from knowspec.impl import runtime as process

DEFAULT_THREADS = 1


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def query_threads() -> int:
    """Threads one query embedding uses: ``KNOWSPEC_VECTOR_THREADS``, else one."""
    return process.current().settings.vector_threads or DEFAULT_THREADS

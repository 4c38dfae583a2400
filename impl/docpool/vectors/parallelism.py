"""How many cores one vector query's embedding may use.

Embedding the query (ONNX Runtime) splits cleanly over intra-op threads that release the GIL:
on a quiet 2-core host two threads took it from 6.7 to 5.0 ms. Ranking does not split: the int8
scan of the chunk matrix runs on the calling thread (``int8_scan``), since a split over threads
lost when the cores were busy with other work.

``KNOWSPEC_VECTOR_THREADS`` (read once into the runtime's settings) sets the count (1 turns the
splitting off, e.g. on a host whose cores are busy with other work); the default is two, or one
on a single-core machine. The results do not depend on it: embeddings are bit-identical.
"""

from __future__ import annotations

import os

from knowspec.impl import runtime as process

DEFAULT_THREADS = 2


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def query_threads() -> int:
    """Threads one query embedding uses: ``KNOWSPEC_VECTOR_THREADS``, else min(2, cores)."""
    configured = process.current().settings.vector_threads
    if configured:
        return configured
    return max(1, min(DEFAULT_THREADS, available_cores()))

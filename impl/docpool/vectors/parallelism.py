"""How many cores one vector query may use, and a way to spread its work over them.

A vector query is two sequential, memory- and compute-bound steps: embedding the query (ONNX
Runtime) and scanning the int8 sketch of the chunk matrix. Both split cleanly over threads that
release the GIL: ONNX Runtime's intra-op threads for the first, column shards of the sketch for
the second. On a quiet 2-core host two threads took the query embedding from 6.7 to 5.0 ms and
the two int8 passes over 100k chunks from 2.7 to 1.4 ms (``benchmarks/docpool_vector.py``).

``KNOWSPEC_VECTOR_THREADS`` (read once into the runtime's settings) sets the count (1 turns the splitting off, e.g. on a host whose
cores are busy with other work); the default is two, or one on a single-core machine. The
results do not depend on it: embeddings are bit-identical and the scan stays exact.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

from knowspec.impl import runtime as process

DEFAULT_THREADS = 2

T = TypeVar("T")
R = TypeVar("R")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def query_threads() -> int:
    """Threads one vector query uses: ``KNOWSPEC_VECTOR_THREADS``, else min(2, cores)."""
    configured = process.current().settings.vector_threads
    if configured:
        return configured
    return max(1, min(DEFAULT_THREADS, available_cores()))


def _helpers() -> ThreadPoolExecutor:
    return process.current().executor("vector", query_threads() - 1)


def run_split(work: Callable[[T], R], parts: Sequence[T]) -> list[R]:
    """``[work(p) for p in parts]``, the first part on the calling thread and the others on
    helper threads at the same time; results in the order of ``parts``."""
    if len(parts) <= 1:
        return [work(p) for p in parts]
    pending = [_helpers().submit(work, p) for p in parts[1:]]
    first = work(parts[0])
    return [first, *(f.result() for f in pending)]

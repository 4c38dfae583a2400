"""A bound on how long a call may run, for tests of inputs that once made the code loop forever.

Without it such a test would hang the run (and one of them grew memory by ~60 MB/s); with it the
test fails at once with ``TimeoutError``. SIGALRM interrupts pure-Python code between bytecodes,
so it works in the main thread only, where pytest (and each xdist worker) runs the tests.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def within(seconds: float) -> Iterator[None]:
    def expired(signum, frame):
        raise TimeoutError(f"did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

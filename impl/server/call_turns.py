"""Tool calls over HTTP take turns at the worker threads, one caller after another.

Why: handlers are CPU-bound and share the process's cores (and the GIL), so forty calls at once
on two cores finish no sooner than four, but each holds its working memory at once: forty cold
``get_semantic_graph`` calls from two addresses (each within its caller's cap of 20) peaked at
2.5 GB. At most ``capacity`` handlers run (``--concurrent-calls``, default twice the cores, at
least 4); a call past it waits in its caller's queue, and a turn that ends goes to the next
caller in rotation, so one caller's backlog never stands in front of another caller's call.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from contextlib import asynccontextmanager
from typing import AsyncIterator

import anyio

from knowspec.impl.config import default_concurrent_calls


class _Waiter:
    __slots__ = ("event", "granted")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.granted = False


class CallTurns:
    """Turns at the handlers, handed out round-robin by caller key; used on the event loop only."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity or default_concurrent_calls()
        self.running = 0
        self._waiting: OrderedDict[str, deque[_Waiter]] = OrderedDict()

    def waiting(self, key: str) -> int:
        return len(self._waiting.get(key, ()))

    @asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        """Hold a turn for one call of ``key``'s, waiting for it when all are taken."""
        if self.running < self.capacity and not self._waiting:
            self.running += 1
        else:
            waiter = _Waiter()
            self._waiting.setdefault(key, deque()).append(waiter)
            try:
                await waiter.event.wait()
            except BaseException:  # cancelled while waiting: a turn handed over meanwhile goes on
                if waiter.granted:
                    self._pass_on()
                else:
                    self._forget(key, waiter)
                raise
        try:
            yield
        finally:
            self._pass_on()

    def _pass_on(self) -> None:
        """A turn ended: the next caller in rotation takes it, else it is free."""
        if not self._waiting:
            self.running -= 1
            return
        key, queue = next(iter(self._waiting.items()))
        waiter = queue.popleft()
        if queue:
            self._waiting.move_to_end(key)  # this caller waits for its next turn behind the others
        else:
            del self._waiting[key]
        waiter.granted = True
        waiter.event.set()

    def _forget(self, key: str, waiter: _Waiter) -> None:
        queue = self._waiting.get(key)
        if queue is not None:
            queue.remove(waiter)
            if not queue:
                del self._waiting[key]

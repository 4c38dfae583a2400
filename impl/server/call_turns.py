"""Tool calls over HTTP take turns at the worker threads, one caller after another.

Why: handlers are CPU-bound and share the process's cores (and the GIL), so forty calls at once
on two cores finish no sooner than four, but each holds its working memory at once: forty cold
``get_semantic_graph`` calls from two addresses (each within its caller's cap of 20) peaked at
2.5 GB. At most ``capacity`` handlers run (``--concurrent-calls``, default twice the cores, at
least 4), and one caller at most ``capacity - 1`` of them, so a turn is always left for someone
else (one writer's twenty slow calls had held all four). One spare turn beyond them is kept
for a caller with nothing running, so a small call does not wait for one of the long calls
others hold (two addresses churning uncached graph calls had made another caller's searches
wait 2.8 s). A call past these waits in its caller's queue; a turn that ends goes to the next
caller in rotation, so one caller's backlog never stands in front of another caller's call. A turn is given back when its handler's thread
returns, not when its call is answered: a cancelled call is answered at once, but its thread
runs to its next cancellation check, and giving its turn back at the answer had let one caller
that cancelled every call run 25 handlers at once (2 GB).
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from contextlib import asynccontextmanager
from typing import AsyncIterator

import anyio

from knowspec.impl.config import default_concurrent_calls


class _Waiter:
    __slots__ = ("event", "granted", "spare")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.granted = False
        self.spare = False


class CallTurns:
    """Turns at the handlers, handed out round-robin by caller key; used on the event loop only."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity or default_concurrent_calls()
        self.per_caller = max(1, self.capacity - 1)
        self.running = 0  # turns taken, the spare one not counted
        self.spare_taken = False
        self._running_of: Counter[str] = Counter()
        self._waiting: OrderedDict[str, deque[_Waiter]] = OrderedDict()

    def waiting(self, key: str) -> int:
        return len(self._waiting.get(key, ()))

    def running_of(self, key: str) -> int:
        return self._running_of.get(key, 0)

    async def take(self, key: str) -> bool:
        """A turn for one call of ``key``'s, waited for when none is free to it; whether it is
        the spare turn (hand it back to ``give``)."""
        free = self._free_for(key)
        if free is not None:
            self._start(key, free)
            return free
        waiter = _Waiter()
        self._waiting.setdefault(key, deque()).append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:  # cancelled while waiting: a turn handed over meanwhile goes on
            if waiter.granted:
                self.give(key, waiter.spare)
            else:
                self._forget(key, waiter)
            raise
        return waiter.spare

    def give(self, key: str, spare: bool = False) -> None:
        """``key``'s call ended its turn: the next callers in rotation take the free turns."""
        if spare:
            self.spare_taken = False
        else:
            self.running -= 1
        self._running_of[key] -= 1
        if self._running_of[key] <= 0:
            del self._running_of[key]
        self._grant()

    @asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        spare = await self.take(key)
        try:
            yield
        finally:
            self.give(key, spare)

    def _free_for(self, key: str) -> bool | None:
        """The turn ``key`` may take now: a counted one (False), the spare one (True), or none."""
        if self.running < self.capacity and self._running_of[key] < self.per_caller:
            return False
        if not self.spare_taken and not self._running_of[key]:
            return True
        return None

    def _start(self, key: str, spare: bool) -> None:
        if spare:
            self.spare_taken = True
        else:
            self.running += 1
        self._running_of[key] += 1

    def _grant(self) -> None:
        """While a turn is free, hand it to the next waiting caller in rotation whose share allows
        it (so no waiter that could run is ever left waiting beside a free turn)."""
        granted = True
        while granted:
            granted = False
            for key in list(self._waiting):
                free = self._free_for(key)
                if free is None:
                    continue
                queue = self._waiting[key]
                waiter = queue.popleft()
                if queue:
                    self._waiting.move_to_end(key)  # its next call waits behind the other callers
                else:
                    del self._waiting[key]
                self._start(key, free)
                waiter.granted, waiter.spare = True, free
                waiter.event.set()
                granted = True

    def _forget(self, key: str, waiter: _Waiter) -> None:
        queue = self._waiting.get(key)
        if queue is not None:
            queue.remove(waiter)
            if not queue:
                del self._waiting[key]

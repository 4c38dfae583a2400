"""Failed-login throttling per client address (spec/security.md "Authentication").

Passwords are scrypt hashes, so each guess costs the server real CPU time; without a limit one
client could try passwords as fast as the server hashes them. Two counters take every attempt
from an address: the user name it names, and the address itself (for any user name). Past a
few free attempts, each further one blocks its counter for a time that doubles up to a cap; an
attempt while a counter is blocked is refused before its password is checked, and is not
counted. A success clears its user's counter and takes its own attempt back from the address's.

No counter spans addresses: a user name can only be blocked from the address that guessed, so a
guesser cannot lock a known user out (the price: guesses spread over many addresses are limited
per address only). Counters are rows of the catalog (``auth$login_counter``), so every worker
and every server sharing the catalog counts together; one atomic transaction reads, judges and
writes both counters, so parallel attempts are counted one after another.

Logins as one user from one address take turns in a process (``LoginTurns``): an attempt is
judged once the ones before it have ended. Counted before their passwords were checked, a burst
of parallel logins with the right password had been refused as failed ones past the free five.

The rule (``block_seconds``, ``wait_seconds``, ``counted``, ...) is pure; ``LoginThrottle``
applies it to the rows.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator, Callable

import anyio

from knowspec.impl.docpool.catalog_store import CatalogStore
from knowspec.impl.rules.fold import ascii_lower

FREE_ATTEMPTS_PER_USER = 5       # per (user name, address): a few typos cost nothing
FREE_ATTEMPTS_PER_ADDRESS = 20   # per address, whatever the user names (password spraying)
FIRST_BLOCK_SECONDS = 1.0        # the first attempt past the free ones blocks this long ...
MAX_BLOCK_SECONDS = 900.0        # ... each next one twice as long, up to this
FORGET_AFTER_SECONDS = 3600.0    # a counter without attempts this long starts from zero
TURN_POLL_SECONDS = 0.005        # how often a login waiting for its turn looks again
TURN_WAIT_SECONDS = 10.0         # a login that waited this long for its turn is refused (429)


@dataclass(frozen=True)
class Counter:
    """Attempts counted under one key, and when the last one was."""

    attempts: int = 0
    last_attempt: float = 0.0


def block_seconds(attempts: int, free: int) -> float:
    """How long ``attempts`` counted attempts block their counter after the last one."""
    over = attempts - free
    if over <= 0:
        return 0.0
    return min(MAX_BLOCK_SECONDS, FIRST_BLOCK_SECONDS * 2.0 ** min(over - 1, 64))


def current(counter: Counter, now: float) -> Counter:
    """The counter as it stands at ``now``: zero once it has been idle long enough."""
    return Counter() if now - counter.last_attempt >= FORGET_AFTER_SECONDS else counter


def wait_seconds(counter: Counter, free: int, now: float) -> float:
    """Seconds until the counter lets an attempt through (0: now)."""
    return max(0.0, counter.last_attempt + block_seconds(counter.attempts, free) - now)


def counted(counter: Counter, now: float) -> Counter:
    return Counter(counter.attempts + 1, now)


def taken_back(counter: Counter) -> Counter:
    """One attempt fewer: a success gives back the count its own attempt took."""
    return Counter(max(0, counter.attempts - 1), counter.last_attempt)


def keys_for(user: str, address: str) -> tuple[str, str]:
    """(the user-from-address key, the address key): digests, so that any user name (a NUL, which
    PostgreSQL text refuses, included) makes a key, and the table holds no names; user names
    compare ASCII case-insensitively, as the catalog's names do."""
    return _digest("user", address, ascii_lower(user)), _digest("address", address)


def _digest(*parts: str) -> str:
    return f"{parts[0]}:" + hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogatepass")).hexdigest()


class LoginThrottle:
    """The rule applied to the catalog's counter rows. ``store`` answers the catalog store for a
    request; ``clock`` is injectable so that tests need not sleep."""

    def __init__(self, store: Callable[[], CatalogStore], clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        self.turns = LoginTurns()

    def admit(self, user: str, address: str) -> int:
        """Count an attempt to log in as ``user`` from ``address``, unless a counter is blocked:
        then nothing is counted and the answer is the whole seconds to wait (else 0)."""
        user_key, address_key = keys_for(user, address)
        free = {user_key: FREE_ATTEMPTS_PER_USER, address_key: FREE_ATTEMPTS_PER_ADDRESS}
        store = self._store()
        with store.transaction() as rows:  # a statement of its own: sweeps never hold counter locks
            rows.remove_idle_login_counters(self._clock() - FORGET_AFTER_SECONDS)
        with store.transaction(atomic=True) as rows:
            now = self._clock()
            counters = {key: current(Counter(*row), now) for key, row in rows.lock_login_counters(sorted(free)).items()}
            wait = max(wait_seconds(counters[key], free[key], now) for key in free)
            if wait > 0:
                return math.ceil(wait)
            for key, counter in counters.items():
                after = counted(counter, now)
                rows.put_login_counter(key, after.attempts, after.last_attempt)
        return 0

    def succeeded(self, user: str, address: str) -> None:
        """The attempt ``admit`` counted logged in: clear the user's counter for this address and
        give the address its attempt back."""
        user_key, address_key = keys_for(user, address)
        with self._store().transaction(atomic=True) as rows:
            rows.remove_login_counter(user_key)
            row = rows.lock_login_counters([address_key])[address_key]
            after = taken_back(Counter(*row))
            rows.put_login_counter(address_key, after.attempts, after.last_attempt)


class TurnNotTaken(Exception):
    """A login waited ``TURN_WAIT_SECONDS`` for the logins before it (as its user, from its
    address) and was not let in."""


class LoginTurns:
    """One login at a time per (user name, address) in this process. A waiting login polls
    instead of blocking a thread or binding a lock to one event loop: a thousand parallel guesses
    hold no worker threads, and each is judged after the one before it was counted, so after the
    free five they are refused at once."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._held: set[str] = set()
        self._guard = threading.Lock()
        self._clock = clock

    def _take(self, key: str) -> bool:
        with self._guard:
            if key in self._held:
                return False
            self._held.add(key)
            return True

    @asynccontextmanager
    async def turn(self, user: str, address: str) -> AsyncIterator[None]:
        """Wait for this user's and address's turn (``TurnNotTaken`` after ``TURN_WAIT_SECONDS``)."""
        key = keys_for(user, address)[0]
        deadline = self._clock() + TURN_WAIT_SECONDS
        while not self._take(key):
            if self._clock() >= deadline:
                raise TurnNotTaken()
            await anyio.sleep(TURN_POLL_SECONDS)
        try:
            yield
        finally:
            with self._guard:
                self._held.discard(key)

"""How many connections an HTTP server process keeps open, so no client can take its descriptors.

A hostile probe opened 21,000 idle connections from one address: the server accepted until the
process ran out of file descriptors, a login then failed with HTTP 500 (the catalog file could
not be opened) and asyncio logged one traceback per failed accept, 21,592 in a burst. Now each
process keeps at most ``total`` connections open, never so many that the descriptors it needs
for its own files run out, and at most ``per_address`` from one client address (a trusted
reverse proxy, ``--forwarded-allow-ips``, speaks for many clients and is held to ``total``
alone). A connection past a cap is closed as soon as it is accepted, before a byte is read, and
the refusals are logged once per ``SAY_EVERY_SECONDS``.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import Counter
from typing import Any, Callable

MAX_CONNECTIONS = 4096
CONNECTIONS_PER_ADDRESS = 512  # above what one user's MCP sessions (100, each a stream and a call) hold
MIN_RESERVE = 64  # descriptors kept for the catalog, pools, bundles and logs; at least an eighth of them
SAY_EVERY_SECONDS = 10.0
ACCEPT_OUT_OF_RESOURCE = "socket.accept() out of system resource"  # asyncio's words for EMFILE and its kin

log = logging.getLogger("knowspec.http")


def open_file_limit() -> int:
    """This process's soft limit on open descriptors, raised first to its hard limit where it is
    lower (as servers commonly do at start); 1024 where the platform has no such limit."""
    try:
        import resource
    except ImportError:  # Windows
        return 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        wanted = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # e.g. macOS refuses more than its kernel's own maximum
            pass
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def connection_cap(descriptors: int, requested: int | None = None) -> int:
    """Connections one process may hold with ``descriptors`` open files allowed: ``requested``
    (default ``MAX_CONNECTIONS``), but never into the reserve the process keeps for its files."""
    reserve = max(MIN_RESERVE, descriptors // 8)
    room = max(1, descriptors - reserve)
    return min(requested or MAX_CONNECTIONS, room)


def trusted_peers(forwarded_allow_ips: str) -> Callable[[str], bool]:
    """Whether a peer address is one the operator trusts to speak for other clients: the entries
    of ``--forwarded-allow-ips`` (addresses or networks, or ``*`` for every peer)."""
    entries = [e.strip() for e in forwarded_allow_ips.split(",") if e.strip()]
    if "*" in entries:
        return lambda address: True
    networks, names = [], set()
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:  # a host name or a socket path: matched as written
            names.add(entry)

    def trusted(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return address in names
        return any(ip in network for network in networks)

    return trusted


class ConnectionLimits:
    """Open connections, in all and per client address; used on one event loop only."""

    def __init__(self, total: int, per_address: int = CONNECTIONS_PER_ADDRESS,
                 trusted: Callable[[str], bool] = lambda address: False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.per_address = per_address
        self.trusted = trusted
        self.open = 0
        self._by_address: Counter[str] = Counter()
        self._clock = clock
        self._refused = 0  # since the last time refusals were logged
        self._said_at: float | None = None

    def admit(self, address: str | None) -> bool:
        """Count a new connection from ``address`` (None: not an IP peer), unless a cap is reached."""
        counted = None if address is None or self.trusted(address) else address  # held to its share
        if self.open >= self.total or (counted is not None and self._by_address[counted] >= self.per_address):
            self._refuse(address)
            return False
        self.open += 1
        if counted is not None:
            self._by_address[counted] += 1
        return True

    def release(self, address: str | None) -> None:
        """An admitted connection from ``address`` closed."""
        self.open -= 1
        if address is not None and address in self._by_address:
            self._by_address[address] -= 1
            if self._by_address[address] <= 0:
                del self._by_address[address]

    def _refuse(self, address: str | None) -> None:
        self._refused += 1
        now = self._clock()
        if self._said_at is None or now - self._said_at >= SAY_EVERY_SECONDS:
            log.warning("closed %d new connection(s) at the connection caps (%d open of %d; %d per address; "
                        "the last from %s)", self._refused, self.open, self.total, self.per_address,
                        address or "a peer without an address")
            self._refused, self._said_at = 0, now


def quiet_accept_failures(loop: Any, clock: Callable[[], float] = time.monotonic) -> None:
    """Log asyncio's failed accepts (out of descriptors or memory) once per ``SAY_EVERY_SECONDS``
    instead of once per waiting connection, each with a traceback; other errors as before."""
    previous = loop.get_exception_handler()
    said_at: float | None = None
    failed = 0  # since the last time failures were logged

    def handler(loop: Any, context: dict) -> None:
        nonlocal said_at, failed
        if context.get("message") != ACCEPT_OUT_OF_RESOURCE:
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        failed += 1
        now = clock()
        if said_at is None or now - said_at >= SAY_EVERY_SECONDS:
            log.error("accepting connections failed %d time(s): %s", failed, context.get("exception"))
            said_at, failed = now, 0

    loop.set_exception_handler(handler)


def limits_for(settings: Any) -> ConnectionLimits:
    """A server process's caps from its settings (``max_connections``, None: the default;
    ``connections_per_address``; ``forwarded_allow_ips``), within its open-file limit (raised to
    the hard limit on the way)."""
    return ConnectionLimits(connection_cap(open_file_limit(), settings.max_connections),
                            settings.connections_per_address, trusted_peers(settings.forwarded_allow_ips))

"""``serve --http --workers N``: N server processes on one port, one event loop each.

A tool call holds the GIL for most of its time, so one process never uses more than one core.
N processes serve N calls at once: uvicorn's supervisor starts them (spawned; a worker that dies
is replaced; SIGINT/SIGTERM stop them all gracefully), and the supervisor itself accepts every
connection and hands it to a worker (``connection_dispatch.py``: a session's connections to the
worker that owns it, new sessions to the workers in turn).

What must hold across workers:
- REST sessions, users, roles and the database registry are rows of the catalog database
  (``impl/rest/sessions.py``, ``impl/docpool/auth.py``, ``impl/docpool/catalog.py``), so a login
  on one worker is honoured by all, and a logout or a revoked role is seen by the next request
  wherever it lands.
- An MCP streamable-HTTP session is live state of the process that opened it (its server task,
  in-flight calls, cancellation, the event stream), so it is routed to that process instead of
  shared: each worker tags the session ids it issues with its own tag and listens on a private
  Unix socket named by that tag (in a run folder only the server's user can open); a request
  for another worker's session that still reaches it (a connection first used for another
  session) is relayed to the owner over that socket, streaming both ways.
  A session whose worker has gone answers 404 "Session not found", as the protocol asks, and the
  client starts a new one.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import anyio

from knowspec.impl.errors import exception_chain
from knowspec.impl.server.json_answer import SESSION_HEADER, send_jsonrpc_error, session_id_of

if TYPE_CHECKING:
    from knowspec.impl.server.connection_limits import ConnectionLimits

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TAG_PATTERN = re.compile(r"[0-9a-f]{12}")
# Headers that belong to one connection, never relayed (RFC 9110 §7.6.1), plus the length httpx sets.
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te",
                        b"trailer", b"upgrade", b"content-length"})


@dataclass(frozen=True)
class Worker:
    """One worker process: the tag its MCP session ids carry and the run folder of private sockets."""

    tag: str
    run_dir: Path

    @classmethod
    def new(cls, run_dir: Path) -> "Worker":
        return cls(secrets.token_hex(6), run_dir)

    @property
    def socket_path(self) -> Path:
        return socket_path(self.run_dir, self.tag)


def owner_tag(session_id: str) -> str | None:
    """The worker tag a session id starts with (``<tag>-<id>``), or ``None`` for an untagged id."""
    tag, sep, _ = session_id.partition("-")
    return tag if sep and TAG_PATTERN.fullmatch(tag) else None


def socket_path(run_dir: Path, tag: str) -> Path:
    return run_dir / f"{tag}.sock"


def tagged_headers(headers: list[tuple[bytes, bytes]], tag: str) -> list[tuple[bytes, bytes]]:
    """Response headers with the MCP session id the SDK drew (``<id>``) tagged as ``<tag>-<id>``."""
    prefix = tag.encode("ascii") + b"-"
    return [(k, prefix + v if k.lower() == SESSION_HEADER else v) for k, v in headers]


def untagged_scope(scope: Scope, session_id: str) -> Scope:
    """``scope`` with its MCP session header cut back to the id the SDK drew (``session_id``)."""
    headers = [(k, session_id.encode("latin-1") if k.lower() == SESSION_HEADER else v)
               for k, v in scope.get("headers") or []]
    return {**scope, "headers": headers}


RELAY_KEEPALIVE = 20  # idle connections kept to each owner worker
RELAYED_CLIENT = b"x-knowspec-relayed-client"  # the client's address, named by the worker that relayed


def relayed_headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    """The headers a relay sends the owner: the request's own, less hop-by-hop ones and any
    relayed-client header the client sent, plus the client's address as this worker saw it."""
    client = scope.get("client")
    headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() not in HOP_BY_HOP | {RELAYED_CLIENT}]
    if client:
        headers.append((RELAYED_CLIENT, str(client[0]).encode("latin-1")))
    return headers


class RelayedClient:
    """Outermost in a worker: a request relayed over the worker's private socket (which has no
    client address of its own, and only the server's user may open) is the client the relaying
    worker named, so per-address rules (anonymous callers' caps) count the real client. A request
    with an address of its own keeps it, whatever headers it sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("client") is None:
            named = dict(scope.get("headers") or []).get(RELAYED_CLIENT)
            if named:
                scope = {**scope, "client": (named.decode("latin-1"), 0)}
        await self.app(scope, receive, send)


async def _session_not_found(send: Send) -> None:
    await send_jsonrpc_error(send, 404, "Session not found")


class SessionRouter:
    """ASGI middleware: MCP session ids carry the worker's tag, and a ``/mcp`` request for a
    session another worker owns is relayed to it.

    The tag lives only on the wire, through the SDK's public surface (its HTTP headers): the
    ``Mcp-Session-Id`` a ``/mcp`` answer carries is tagged on the way out (``<tag>-<id>``) and
    cut back to the SDK's own id on the way in, so the SDK's session manager keeps the ids it
    drew and none of its internals is touched. An id without a valid tag was never issued by a
    worker: 404 "Session not found". REST and other paths go to ``app`` untouched. The relay
    reads the (already capped) body, sends it over the owner's private socket (where the
    owner's own router untags it) and streams the answer back as it comes (event streams
    included) until either side ends; the owner checks the bearer token again, as for any request.
    """

    def __init__(self, app: ASGIApp, tag: str, run_dir: Path) -> None:
        self.app = app
        self.tag = tag
        self.run_dir = run_dir
        self._clients: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path", "").rstrip("/") != "/mcp":
            await self.app(scope, receive, send)
            return
        session_id = session_id_of(scope)
        owner = None if session_id is None else owner_tag(session_id)
        if session_id is not None and owner is None:
            await _session_not_found(send)
            return
        if session_id is None or owner == self.tag:
            if session_id is not None:
                scope = untagged_scope(scope, session_id[len(self.tag) + 1:])
            await self.app(scope, receive, self._tagging(send))
            return
        assert owner is not None
        path = socket_path(self.run_dir, owner)
        if not path.exists():
            await _session_not_found(send)
            return
        await self._relay(owner, path, scope, receive, send)

    def _tagging(self, send: Send) -> Send:
        async def send_tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": tagged_headers(list(message.get("headers") or []), self.tag)}
            await send(message)

        return send_tagged

    def _client(self, owner: str, path: Path):
        import httpx2 as httpx

        client = self._clients.get(owner)
        if client is None:
            # No cap on connections to the owner (httpx's default is 100, then requests queue with
            # no timeout): one anonymous client relaying 100 event streams had every other caller's
            # relayed requests wait for good. What each caller may relay is capped where it arrives
            # (requests in flight, sessions per caller).
            client = self._clients[owner] = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=str(path), limits=httpx.Limits(
                    max_connections=None, max_keepalive_connections=RELAY_KEEPALIVE)), base_url="http://worker",
                timeout=None)
        return client

    def _forget(self, owner: str, path: Path) -> None:
        """A worker that died left its socket file (refused: nothing listens on it) and our client
        for it. The client is dropped, not closed: another relay may be sending through it now,
        and a closed client raises where a dead owner's answer is 404 (it holds no connection)."""
        path.unlink(missing_ok=True)
        self._clients.pop(owner, None)

    async def _relay(self, owner: str, path: Path, scope: Scope, receive: Receive, send: Send) -> None:
        import httpx2 as httpx

        client = self._client(owner, path)
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        target = scope.get("raw_path") or scope["path"].encode("utf-8")
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        request = client.build_request(scope["method"], target.decode("latin-1"), headers=relayed_headers(scope),
                                       content=b"".join(chunks))
        try:
            answer = await client.send(request, stream=True)
        except httpx.TransportError as exc:  # the owner is gone: its sessions are gone with it
            if _refused(exc):
                self._forget(owner, path)
            await _session_not_found(send)
            return
        try:
            async with anyio.create_task_group() as group:
                async def watch_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(watch_disconnect)
                await send({"type": "http.response.start", "status": answer.status_code,
                            "headers": [(k.lower(), v) for k, v in answer.headers.raw if k.lower() not in HOP_BY_HOP]})
                try:
                    async for chunk in answer.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.TransportError:
                    pass  # the owner stopped mid-answer: end this one too
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()
        finally:
            await answer.aclose()



def _refused(exc: BaseException) -> bool:
    """Whether a failed relay met no listener at all (a dead worker; its socket file gone too,
    when another relay forgot it first), not a busy or slow one."""
    return any(isinstance(e, (ConnectionRefusedError, FileNotFoundError)) for e in exception_chain(exc))


def with_worker_listeners(app: Any, worker: Worker, log_level: str, limits: ConnectionLimits | None = None) -> None:
    """Serve ``app``, for as long as it runs, on the worker's private Unix socket (relayed
    requests) and on the connections the supervisor hands it (``connection_handoff.py``).

    One uvicorn server does both, so stopping it drains both; it is composed into the Starlette
    app's lifespan, so it starts after the MCP session manager runs and stops before it stops.
    """
    import uvicorn

    from knowspec.impl.server.connection_handoff import HandoffReceiver, handoff_path
    from knowspec.impl.server.http_protocol import DeadlineProtocol, capped

    protocol = DeadlineProtocol if limits is None else capped(limits)  # the caps count this worker's connections
    inner = app.router.lifespan_context
    path = worker.socket_path

    @asynccontextmanager
    async def lifespan(starlette_app: Any):
        async with inner(starlette_app) as state:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(path))
            os.chmod(path, 0o600)
            config = uvicorn.Config(app, uds=str(path), lifespan="off", log_level=log_level.lower(),
                                    http=protocol, proxy_headers=False)
            config.load()
            server = uvicorn.Server(config)
            server.lifespan = config.lifespan_class(config)  # what Server.serve sets up: "off" here
            await server.startup(sockets=[sock])

            def http_protocol() -> Any:  # what uvicorn's Server.startup gives its listeners
                return config.http_protocol_class(config=config, server_state=server.server_state,  # type: ignore[call-arg]
                                                  app_state=server.lifespan.state)

            async def keep_default_headers() -> None:  # Date (and Server): what uvicorn's main loop does
                while True:
                    await server.on_tick(0)
                    await asyncio.sleep(1)

            await server.on_tick(0)
            ticking = asyncio.get_running_loop().create_task(keep_default_headers())
            receiver = HandoffReceiver(handoff_path(worker.run_dir, worker.tag), http_protocol)
            receiver.start()
            try:
                yield state
            finally:
                receiver.stop()
                ticking.cancel()
                server.should_exit = True
                await server.shutdown(sockets=[sock])
                path.unlink(missing_ok=True)

    app.router.lifespan_context = lifespan


def worker_app(args: argparse.Namespace, run_dir: str):
    """The app one worker serves (called by uvicorn in the spawned worker: ``factory=True``)."""
    from knowspec.impl.cli import prepare_serve
    from knowspec.impl.server.connection_limits import limits_for
    from knowspec.impl.server.http_app import build_app

    runtime = prepare_serve(args)
    host, _ = args.http
    worker = Worker.new(Path(run_dir))
    app = build_app(runtime, host=host, worker=worker)
    with_worker_listeners(app, worker, args.log_level, limits_for(runtime.settings))
    return app


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (IPv6 when the host has a colon), not yet listening.

    Made with ``IPPROTO_TCP`` named: asyncio turns Nagle off (``TCP_NODELAY``) only on sockets whose
    protocol says TCP, and an accepted socket inherits the listener's. With protocol 0 every
    answer written as headers then body waited for the client's delayed ACK: ~40 ms a response."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def serve_workers(args: argparse.Namespace, sock: socket.socket, workers: int) -> int:
    """Run ``workers`` worker processes behind ``sock`` (bound, not yet listening) until
    SIGINT/SIGTERM; a worker that dies is replaced (and said so on stderr); one that cannot start
    stops the server with exit code 1. This process listens and hands connections out."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    from knowspec.impl.server.connection_dispatch import Dispatcher
    from knowspec.impl.server.http_protocol import DeadlineProtocol

    run_dir = Path(tempfile.mkdtemp(prefix="knowspec-workers-"))  # mode 0700: only this user may relay
    host, _ = args.http
    port = sock.getsockname()[1]
    config = uvicorn.Config(functools.partial(worker_app, args, str(run_dir)), factory=True, host=host, port=port,
                            workers=workers, log_level=args.log_level.lower(), http=DeadlineProtocol,
                            proxy_headers=False)
    dispatcher = Dispatcher(sock, run_dir)

    class Supervisor(Multiprocess):
        """uvicorn's supervisor (its workers listen on nothing: connections are handed to them),
        saying when a worker died and closing the door before the workers stop."""

        def keep_subprocess_alive(self) -> None:
            before = [(p.pid, p) for p in self.processes]
            super().keep_subprocess_alive()
            for (pid, old), new in zip(before, self.processes):
                if new is not old:
                    print(f"knowspec serve: worker {pid} stopped (exit code {old.exitcode}); "
                          f"started worker {new.pid} in its place", file=sys.stderr, flush=True)

        def terminate_all(self) -> None:
            dispatcher.stop()  # no connection is handed to a worker that is stopping
            super().terminate_all()

    supervisor = Supervisor(config, sockets=[])
    from knowspec.impl.cli import _announce

    dispatcher.start()
    _announce(host, port)
    try:
        supervisor.run()
    finally:
        dispatcher.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    failed = [p.pid for p in supervisor.processes if p.exitcode == STARTUP_FAILURE]
    if failed:
        print(f"knowspec serve: worker {failed[0]} could not start; the server stopped (see the log above)",
              file=sys.stderr)
        return 1
    return 0

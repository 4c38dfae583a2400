"""``serve --http --workers N``: N server processes on one port, one event loop each.

A tool call holds the GIL for most of its time, so one process never uses more than one core.
N processes (uvicorn's supervisor: spawned workers, each listening on its own ``SO_REUSEPORT``
socket of the one port so the kernel spreads connections evenly; a worker that dies is replaced,
SIGINT/SIGTERM stop them all gracefully) serve N calls at once.

What must hold across workers:
- REST sessions, users, roles and the database registry are rows of the catalog database
  (``impl/rest/sessions.py``, ``impl/docpool/auth.py``, ``impl/docpool/catalog.py``), so a login
  on one worker is honoured by all, and a logout or a revoked role is seen by the next request
  wherever it lands.
- An MCP streamable-HTTP session is live state of the process that opened it (its server task,
  in-flight calls, cancellation, the event stream), so it is routed to that process instead of
  shared: each worker tags the session ids it issues with its own tag and listens on a private
  Unix socket named by that tag (in a run folder only the server's user can open); a request
  for another worker's session is relayed to the owner over that socket, streaming both ways.
  A session whose worker has gone answers 404 "Session not found", as the protocol asks, and the
  client starts a new one.
"""

from __future__ import annotations

import argparse
import functools
import json
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
from typing import Any, Awaitable, Callable

import anyio

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = b"mcp-session-id"
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


async def _session_not_found(send: Send) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": -32600, "message": "Session not found"}}).encode("utf-8")
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


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
        session_id = self._session_id(scope)
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
        await self._relay(self._client(owner, path), scope, receive, send)

    def _tagging(self, send: Send) -> Send:
        async def send_tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": tagged_headers(list(message.get("headers") or []), self.tag)}
            await send(message)

        return send_tagged

    @staticmethod
    def _session_id(scope: Scope) -> str | None:
        for key, value in scope.get("headers") or []:
            if key.lower() == SESSION_HEADER:
                return value.decode("latin-1")
        return None

    def _client(self, owner: str, path: Path):
        import httpx2 as httpx

        client = self._clients.get(owner)
        if client is None:
            client = self._clients[owner] = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=str(path)), base_url="http://worker", timeout=None)
        return client

    async def _relay(self, client: Any, scope: Scope, receive: Receive, send: Send) -> None:
        import httpx2 as httpx

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
        headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() not in HOP_BY_HOP]
        request = client.build_request(scope["method"], target.decode("latin-1"), headers=headers,
                                       content=b"".join(chunks))
        try:
            answer = await client.send(request, stream=True)
        except httpx.TransportError:  # the owner is gone: its sessions are gone with it
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



def with_private_listener(app: Any, worker: Worker, log_level: str) -> None:
    """Serve ``app`` on the worker's private Unix socket too, for as long as the app runs.

    Composed into the Starlette app's lifespan, so the listener opens after the MCP session
    manager is running and closes before it stops.
    """
    import uvicorn

    inner = app.router.lifespan_context
    path = worker.socket_path

    @asynccontextmanager
    async def lifespan(starlette_app: Any):
        async with inner(starlette_app) as state:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(path))
            os.chmod(path, 0o600)
            config = uvicorn.Config(app, uds=str(path), lifespan="off", log_level=log_level.lower())
            config.load()
            private = uvicorn.Server(config)
            private.lifespan = config.lifespan_class(config)  # what Server.serve sets up: "off" here
            await private.startup(sockets=[sock])
            try:
                yield state
            finally:
                private.should_exit = True
                await private.shutdown(sockets=[sock])
                path.unlink(missing_ok=True)

    app.router.lifespan_context = lifespan


def worker_app(args: argparse.Namespace, run_dir: str):
    """The app one worker serves (called by uvicorn in the spawned worker: ``factory=True``)."""
    from knowspec.impl.cli import prepare_serve
    from knowspec.impl.server.http_app import build_app

    runtime = prepare_serve(args)
    host, _ = args.http
    worker = Worker.new(Path(run_dir))
    app = build_app(runtime, host=host, worker=worker)
    with_private_listener(app, worker, args.log_level)
    return app


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT``: each worker listens on its own such
    socket, and the kernel spreads new connections over them evenly. (One socket shared by all
    workers would not: the first worker to wake accepts every waiting connection at once.)"""
    return bound_socket(host, port, reuse_port=True)


def bound_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """A TCP socket bound to ``host:port`` (IPv6 when the host has a colon), not yet listening.

    Made with ``IPPROTO_TCP`` named: asyncio turns Nagle off (``TCP_NODELAY``) only on sockets whose
    protocol says TCP, and an accepted socket inherits the listener's. With protocol 0 every
    answer written as headers then body waited for the client's delayed ACK: ~40 ms a response."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def serve_workers(args: argparse.Namespace, sock: socket.socket, workers: int) -> int:
    """Run ``workers`` worker processes on ``sock``'s port until SIGINT/SIGTERM; a worker that dies is
    replaced (and said so on stderr); one that cannot start stops the server with exit code 1.

    ``sock`` (from ``reuseport_socket``) holds the port and never listens; every worker gets a
    listening socket of its own on the same port, closed with the worker.
    """
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    run_dir = Path(tempfile.mkdtemp(prefix="knowspec-workers-"))  # mode 0700: only this user may relay
    host, _ = args.http
    port = sock.getsockname()[1]
    config = uvicorn.Config(functools.partial(worker_app, args, str(run_dir)), factory=True, host=host, port=port,
                            workers=workers, log_level=args.log_level.lower())

    class Supervisor(Multiprocess):
        """uvicorn's supervisor, handing each new worker a socket of its own and saying when one died."""

        @property
        def sockets(self) -> list[socket.socket]:
            fresh = reuseport_socket(host, port)
            self.handed_out.append(fresh)
            return [fresh]

        @sockets.setter
        def sockets(self, value: list[socket.socket]) -> None:
            self.handed_out: list[socket.socket] = []

        def close_handed_out(self) -> None:
            # The child received its own copy when it was started; the parent's must not keep a
            # dead worker's socket listening.
            for handed in self.handed_out:
                handed.close()
            self.handed_out.clear()

        def init_processes(self) -> None:
            super().init_processes()
            self.close_handed_out()

        def keep_subprocess_alive(self) -> None:
            before = [(p.pid, p) for p in self.processes]
            super().keep_subprocess_alive()
            self.close_handed_out()
            for (pid, old), new in zip(before, self.processes):
                if new is not old:
                    print(f"knowspec serve: worker {pid} stopped (exit code {old.exitcode}); "
                          f"started worker {new.pid} in its place", file=sys.stderr, flush=True)

    supervisor = Supervisor(config, sockets=[])
    from knowspec.impl.cli import _announce

    _announce(host, port)
    try:
        supervisor.run()
    finally:
        supervisor.close_handed_out()
        shutil.rmtree(run_dir, ignore_errors=True)
    failed = [p.pid for p in supervisor.processes if p.exitcode == STARTUP_FAILURE]
    if failed:
        print(f"knowspec serve: worker {failed[0]} could not start; the server stopped (see the log above)",
              file=sys.stderr)
        return 1
    return 0

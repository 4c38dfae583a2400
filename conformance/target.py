"""How the suite reaches a server: a stdio command or a streamable-HTTP URL, over one era.

``Connection`` is a synchronous facade over an async MCP session that lives in an anyio
blocking portal, so checks (and hypothesis, which is synchronous) can call tools directly
and still shrink failing inputs. It bypasses the SDK's client-side output validation by
sending raw ``CallToolRequest`` messages: classifying bad outputs is the suite's job.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterator

import mcp.types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

ERAS = {"legacy": "legacy", "modern": "2026-07-28"}


class TargetError(Exception):
    """The target cannot be reached or is misconfigured (exit code 2)."""


@dataclass(frozen=True)
class Target:
    """``stdio:<command line>`` or ``http(s)://host:port/mcp``."""

    spec: str
    era: str = "legacy"
    timeout: float = 30.0

    @property
    def is_stdio(self) -> bool:
        return self.spec.startswith("stdio:")

    def argv(self) -> list[str]:
        return shlex.split(self.spec[len("stdio:"):])

    def validate(self) -> None:
        if self.era not in ERAS:
            raise TargetError(f"unknown era {self.era!r} (legacy or modern)")
        if self.is_stdio:
            if not self.argv():
                raise TargetError("stdio target has no command")
        elif not self.spec.startswith(("http://", "https://")):
            raise TargetError(f"target must be stdio:<command> or an http(s) URL, got {self.spec!r}")


@dataclass(frozen=True)
class CallOutcome:
    """What one ``tools/call`` produced: a result, a JSON-RPC error, or a transport failure."""

    arguments: Any
    is_error: bool = False
    structured: Any = None
    texts: tuple[str, ...] = ()
    raw: dict[str, Any] | None = None
    rpc_error: tuple[int, str] | None = None
    transport_error: str | None = None

    @property
    def is_result(self) -> bool:
        return self.raw is not None

    def canonical_bytes(self) -> bytes:
        """The result as compared for determinism: the JSON the server sent, key order kept."""
        if self.raw is not None:
            return json.dumps(self.raw, ensure_ascii=False, separators=(",", ":")).encode()
        return json.dumps({"rpc_error": self.rpc_error, "transport": self.transport_error}).encode()

    def summary(self) -> dict[str, Any]:
        """A JSON-able picture of the response for reports."""
        if self.raw is not None:
            return self.raw
        if self.rpc_error is not None:
            return {"jsonrpc_error": {"code": self.rpc_error[0], "message": self.rpc_error[1]}}
        return {"transport_error": self.transport_error}


def _transport(target: Target, errlog: Any) -> Any:
    if target.is_stdio:
        argv = target.argv()
        return stdio_client(StdioServerParameters(command=argv[0], args=argv[1:]), errlog=errlog)
    return streamable_http_client(target.spec)


@dataclass
class Connection:
    portal: BlockingPortal
    client: Client
    target: Target
    _tools: list[dict[str, Any]] | None = field(default=None, init=False)

    async def _call(self, name: str, arguments: Any, timeout: float) -> CallOutcome:
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
        try:
            result = await self.client.session.send_request(
                request, types.CallToolResult, request_read_timeout_seconds=timeout
            )
        except MCPError as exc:
            return CallOutcome(arguments, rpc_error=(exc.error.code, exc.error.message))
        except Exception as exc:  # noqa: BLE001 - any transport fault becomes data, never a crash
            return CallOutcome(arguments, transport_error=f"{type(exc).__name__}: {exc}")
        raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        texts = tuple(c.text for c in result.content if isinstance(c, types.TextContent))
        return CallOutcome(
            arguments,
            is_error=bool(result.is_error),
            structured=result.structured_content,
            texts=texts,
            raw=raw,
        )

    def call(self, name: str, arguments: Any, timeout: float | None = None) -> CallOutcome:
        return self.portal.call(self._call, name, arguments, timeout or self.target.timeout)

    def call_many(self, calls: list[tuple[str, Any]], timeout: float | None = None) -> list[CallOutcome]:
        """Send the calls concurrently on this one session and return outcomes in call order."""

        async def run() -> list[CallOutcome]:
            import anyio

            out: list[CallOutcome | None] = [None] * len(calls)

            async def one(i: int, name: str, args: Any) -> None:
                out[i] = await self._call(name, args, timeout or self.target.timeout)

            async with anyio.create_task_group() as tg:
                for i, (name, args) in enumerate(calls):
                    tg.start_soon(one, i, name, args)
            return [o for o in out if o is not None]

        return self.portal.call(run)

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server advertises, as wire-shaped dicts (camelCase keys)."""
        if self._tools is None:

            async def fetch() -> list[dict[str, Any]]:
                tools: list[dict[str, Any]] = []
                cursor = None
                for _ in range(100):
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await self.client.session.send_request(
                        types.ListToolsRequest(params=params), types.ListToolsResult
                    )
                    tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
                return tools

            self._tools = self.portal.call(fetch)
        return self._tools


@contextlib.contextmanager
def connect(target: Target) -> Iterator[Connection]:
    """Open one MCP session to the target; ``TargetError`` when it cannot be reached."""
    target.validate()
    errlog = tempfile.TemporaryFile(mode="w+")  # the server's stderr: kept off the terminal
    with start_blocking_portal() as portal:
        client = Client(_transport(target, errlog), mode=ERAS[target.era], cache=None,
                        read_timeout_seconds=target.timeout)
        try:
            cm = portal.wrap_async_context_manager(client)
            entered = cm.__enter__()
        except BaseException as exc:  # noqa: BLE001 - spawn/handshake failures of any kind
            errlog.seek(0)
            tail = errlog.read()[-400:].strip()
            detail = f"{type(exc).__name__}: {exc}" + (f" (server stderr: {tail})" if tail else "")
            raise TargetError(f"cannot open an MCP session to {target.spec}: {detail}") from None
        try:
            yield Connection(portal, entered, target)
        finally:
            with contextlib.suppress(BaseException):
                cm.__exit__(None, None, None)
            errlog.close()

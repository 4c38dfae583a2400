"""Tool answers are encoded once, in the call's worker thread; the SDK only ever carries a placeholder.

Left to itself the SDK turns a handler's ``CallToolResult`` into wire bytes on the event loop: it
dumps the result model, validates and dumps it again per protocol version, builds the JSON-RPC
response model and dumps that to JSON. For a 55 MiB answer that is seconds in which ``/healthz``
and every other client wait, and for any big answer it is several times the cost of one
``json.dumps``. So the call's worker thread (under the call deadline) encodes the answer's heavy
values, its text blocks and its structured content, parks the bytes here under a random token and
hands the SDK the same result with each heavy value replaced by a short marker naming its slot.
The SDK shapes and frames that small result exactly as it would the real one (every protocol era,
every transport); on its way out, the one seam in this module (``splice``) replaces each marker
with its parked bytes. Where the marker bytes are found is the only thing the transports differ
in: an ASGI wrapper for streamable HTTP (``ParkedAnswerWriter``: SSE events and JSON bodies, 2025
sessions and 2026-07-28 single exchanges alike) and the stdio transport's writer.

A kept answer (``impl/kept_answers.py``: list_concepts or get_semantic_graph asked again on the
same snapshot revision) is parked as the JSON it was kept as, escaped for the era that needs it.

The values are encoded as the SDK's writer would encode them, so the bytes are the SDK's own: raw
UTF-8 where the SDK writes with pydantic (stdio, 2025-era HTTP), ``\\uXXXX`` escapes where it
writes with ``json.dumps`` (2026-07-28 HTTP). ``tests/server/test_parked_answers.py`` compares the
two paths byte for byte on every transport, and fails when an SDK release changes its writers.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

import anyio
import mcp.types as types
import pydantic_core
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from knowspec.impl.server.native_memory import TRIM_AFTER_ANSWER_BYTES
from knowspec.impl.rules.sliced_json import json_pieces
from knowspec.impl.server.tool_results import EncodedToolResult

if TYPE_CHECKING:  # the HTTP writer's; a stdio server never loads the HTTP stack
    from knowspec.impl.server.caller_load import AnswerBytesPerCaller

PARKED_KEY = "knowspec/parked"  # the structured content of a placeholder: {PARKED_KEY: "<token>:<slot>"}
TEXT_MARK = PARKED_KEY + ":"  # the text of a placeholder's text block: "knowspec/parked:<token>:<slot>"
MAX_PARKED_SECONDS = 300.0  # an answer whose placeholder is never written (client gone) is dropped after this
OWNED_TOKENS = "knowspec.parked_tokens"  # in an HTTP request's scope: the answers parked for it
OWNER_ENDED = "knowspec.request_ended"  # in an HTTP request's scope: its response is over
MAX_PLACEHOLDER_BYTES = 256 * 1024  # a placeholder message is small; bigger bytes are never scanned
CHUNK_BYTES = 1 << 20  # parked bytes are joined into chunks of about this size (fewer writes)

# A marker as the SDK writes it; never one inside a JSON string (there its quotes are escaped).
_MARKER = re.compile(rb'(?<!\\)(?:\{"' + PARKED_KEY.encode() + rb'":"([0-9a-f]{32}):(\d+)"\}|"'
                     + TEXT_MARK.encode() + rb'([0-9a-f]{32}):(\d+)")')


def is_placeholder(message: Any) -> bool:
    """Whether a JSON-RPC ``message`` is a tool answer whose heavy values were parked (``park``):
    the small placeholder the SDK shapes, cheap to encode anywhere."""
    result = getattr(message, "result", None)
    if not isinstance(result, dict):
        return False
    structured, content = result.get("structuredContent"), result.get("content")
    return (isinstance(structured, dict) and list(structured) == [PARKED_KEY] and isinstance(content, list)
            and all(isinstance(c, dict) and str(c.get("text", "")).startswith(TEXT_MARK) for c in content))


def ascii_for_http(protocol_version: str) -> bool:
    """Whether the SDK's streamable HTTP writer escapes non-ASCII for this protocol version."""
    return protocol_version in MODERN_PROTOCOL_VERSIONS


def encoded(value: Any, ensure_ascii: bool) -> list[bytes]:
    """``value`` as compact JSON bytes, encoded in short slices (``sliced_json``), in ~1 MiB chunks.

    What slicing cannot encode (a lone surrogate in raw UTF-8, NaN) is left to pydantic, as the
    SDK would do it.
    """
    chunks: list[bytes] = []
    pending: list[bytes] = []
    size = 0
    try:
        for piece in json_pieces(value, ensure_ascii):
            data = piece.encode("utf-8")
            pending.append(data)
            size += len(data)
            if size >= CHUNK_BYTES:
                chunks.append(b"".join(pending))
                pending, size = [], 0
    except (TypeError, ValueError):
        return [pydantic_core.to_json(value)]
    if pending or not chunks:
        chunks.append(b"".join(pending))
    return chunks


class ParkedAnswers:
    """Encoded answer values waiting for the SDK's placeholder to reach the wire; thread-safe.

    ``ensure_ascii(protocol_version)`` says how the transport's SDK writer encodes text.
    """

    def __init__(self, ensure_ascii: Callable[[str], bool] = lambda version: False,
                 max_age: float = MAX_PARKED_SECONDS, clock: Callable[[], float] = time.monotonic,
                 written: Callable[[int], Any] = lambda nbytes: None):
        self.written = written  # the transports call it (off the event loop) once an answer's bytes are out
        self._parked: dict[str, tuple[float, list[list[bytes]]]] = {}
        self._lock = threading.Lock()
        self._ensure_ascii = ensure_ascii
        self._max_age = max_age
        self._clock = clock

    def park(self, result: types.CallToolResult, protocol_version: str,
             owner: dict[str, Any] | None = None) -> types.CallToolResult:
        """Encode ``result``'s heavy values and keep them; return the placeholder for the SDK.

        ``owner`` is the scope of the HTTP request that asked: once it has ended (``release``)
        the answer can never be written, so it is not kept (a client that hangs up at once
        would otherwise leave each answer parked for ``max_age``)."""
        token = secrets.token_hex(16)
        ascii_only = self._ensure_ascii(protocol_version)
        slots: list[list[bytes]] = []

        def slot(value: Any) -> str:
            slots.append(encoded(value, ascii_only))
            return f"{token}:{len(slots) - 1}"

        def slot_of(data: bytes) -> str:
            slots.append([data])
            return f"{token}:{len(slots) - 1}"

        kept = result.kept if isinstance(result, EncodedToolResult) else None
        structured: dict[str, str] | None
        if kept is not None:  # a kept answer's text and structured content, written as kept
            content: list[Any] = [types.TextContent(type="text", text=TEXT_MARK + slot_of(
                _as_written(kept.text_json(), ascii_only)))]
            structured = {PARKED_KEY: slot_of(_as_written(kept.structured_json(), ascii_only))}
        else:
            content = [c.model_copy(update={"text": TEXT_MARK + slot(c.text)}) if isinstance(c, types.TextContent)
                       else c for c in result.content]
            written = _written_structured(result, ascii_only)
            if written is not None:
                structured = {PARKED_KEY: slot_of(written)}
            else:
                structured = None if result.structured_content is None else {PARKED_KEY: slot(result.structured_content)}
        now = self._clock()
        with self._lock:
            for stale in [t for t, (at, _) in self._parked.items() if now - at > self._max_age]:
                del self._parked[stale]
            if owner is None or not owner.get(OWNER_ENDED):
                self._parked[token] = (now, slots)
                if owner is not None:
                    owner.setdefault(OWNED_TOKENS, []).append(token)
        placeholder = result.model_copy(update={"content": content, "structured_content": structured})
        if isinstance(placeholder, EncodedToolResult):
            placeholder.forget_json()  # the SDK carries the placeholder: it need not hold the JSON too
        return placeholder

    def splice(self, data: bytes) -> list[bytes] | None:
        """The bytes to write instead of ``data``, which the SDK wrote for a placeholder; None when
        ``data`` carries no marker. The parked answer is taken (removed)."""
        if len(data) > MAX_PLACEHOLDER_BYTES or PARKED_KEY.encode() not in data:
            return None
        markers = list(_MARKER.finditer(data))
        if not markers:
            return None
        with self._lock:
            taken = {token: self._parked.pop(token, None) for token in {_token(m) for m in markers}}
        out: list[bytes] = []
        at = 0
        for marker in markers:
            entry = taken[_token(marker)]
            index = int(marker.group(2) or marker.group(4))
            if entry is None or index >= len(entry[1]):  # dropped as stale: say so, never write a marker
                return [unavailable(data)]
            out.append(data[at:marker.start()])
            out.extend(entry[1][index])
            at = marker.end()
        out.append(data[at:])
        return out

    def release(self, owner: dict[str, Any]) -> None:
        """The HTTP request whose scope is ``owner`` has ended: drop what was parked for it and
        not written, and park nothing more for it."""
        with self._lock:
            owner[OWNER_ENDED] = True
            for token in owner.pop(OWNED_TOKENS, ()):
                self._parked.pop(token, None)

    async def after_writing(self, size: int) -> None:
        """A transport wrote a parked answer of ``size`` bytes and let go of them: ``written(size)``
        in a worker thread, for a big one only (a small answer frees too little to be worth it)."""
        if size >= TRIM_AFTER_ANSWER_BYTES:
            with anyio.CancelScope(shield=True):  # a request task ended with its answer still reports it
                await anyio.to_thread.run_sync(self.written, size)

    def __len__(self) -> int:
        return len(self._parked)


def _written_structured(result: types.CallToolResult, ascii_only: bool) -> bytes | None:
    """The structured content's bytes from the JSON the pipeline already wrote for it
    (``tool_results.EncodedToolResult``), when they are the bytes ``encoded`` would give (under
    ``ascii_only``, with every character past ``~`` escaped as ``ensure_ascii`` escapes it);
    never with a lone surrogate in raw UTF-8 (``encoded`` leaves that to pydantic)."""
    text = result.structured_json if isinstance(result, EncodedToolResult) else None
    if text is None:
        return None
    if ascii_only:
        return ascii_json(text.encode("utf-8", "surrogatepass"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _as_written(data: bytes, ascii_only: bool) -> bytes:
    """Compact JSON (UTF-8, non-ASCII kept) as the transport's writer encodes it."""
    return ascii_json(data) if ascii_only else data


def _escaped(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"


def _escaped_run(found: re.Match[bytes]) -> bytes:
    return "".join(map(_escaped, found.group().decode("utf-8", "surrogatepass"))).encode("ascii")


_PAST_TILDE = re.compile(rb"[\x7f-\xff]+")  # DEL, and every byte of a character past ASCII
_ASCII_SPAN = 4096  # bytes tested at once for characters to escape (most spans of big answers have none)


def ascii_json(json_utf8: bytes) -> bytes:
    """Compact JSON written without ``ensure_ascii`` (UTF-8; a lone surrogate as ``surrogatepass``
    writes it) as ``ensure_ascii`` writes it: outside strings JSON is ASCII, and inside them that
    option escapes exactly the characters past ``~`` (DEL and every non-ASCII one; one past the
    BMP as a surrogate pair). Works on the bytes, span by span, and escapes only the spans that
    need it: the whole text as a ``str`` would be four bytes a character as soon as one lies past
    the BMP, and a pattern scan of every byte is ten times slower than ``bytes.isascii``."""
    if json_utf8.isascii() and b"\x7f" not in json_utf8:
        return json_utf8
    parts, start, size = [], 0, len(json_utf8)
    while start < size:
        end = min(start + _ASCII_SPAN, size)
        while end < size and 0x80 <= json_utf8[end] < 0xC0:  # never inside a character
            end += 1
        span = json_utf8[start:end]
        parts.append(span if span.isascii() and b"\x7f" not in span else _PAST_TILDE.sub(_escaped_run, span))
        start = end
    return b"".join(parts)


def _token(marker: re.Match[bytes]) -> str:
    return (marker.group(1) or marker.group(3)).decode("ascii")


UNAVAILABLE = "the answer was no longer available"
UNREAD = ("the answer was not sent: this caller has too many answers it has not read yet "
          "(read them, or send fewer calls at once)")
SEND_SLICE_BYTES = 256 * 1024  # parked bytes reach the transport in slices: it copies what it is given


def unavailable(data: bytes, message: str = UNAVAILABLE) -> bytes:
    """``data`` with its JSON-RPC message (from its first ``{`` to its last ``}``) replaced by an
    internal error for the same request id."""
    start, end = data.find(b"{"), data.rfind(b"}") + 1
    try:
        request_id = json.loads(data[start:end]).get("id")
    except (ValueError, AttributeError):
        request_id = None
    error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(
        code=types.INTERNAL_ERROR, message=message))
    return data[:start] + error.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + data[end:]


class ParkedAnswerWriter:
    """ASGI wrapper of the MCP endpoint: a response body (or SSE event) the SDK wrote for a
    placeholder goes out as the parked answer, in its chunks; a JSON body's Content-Length follows.

    Uses nothing of the SDK but the bytes it writes: streamed (SSE) responses pass their headers
    at once; a plain response's headers wait for its body, which may change its length.
    """

    def __init__(self, app: Any, answers: ParkedAnswers, path: str = "/mcp",
                 unsent: AnswerBytesPerCaller | None = None):
        from knowspec.impl.server.caller_load import AnswerBytesPerCaller
        from knowspec.impl.server.session_quota import caller_key

        self.app = app
        self.answers = answers
        self.path = path
        self.unsent = unsent or AnswerBytesPerCaller()
        self.caller_key = caller_key

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] | None = None
        caller = self.caller_key(scope)

        async def write(message: dict[str, Any]) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and not _streamed(message):
                held = message
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            more = message.get("more_body", False)
            body = message.get("body", b"")
            pieces = self.answers.splice(body)
            size = 0 if pieces is None else sum(map(len, pieces))
            if pieces is not None and not self.unsent.take(caller, size):  # its client reads none of them
                pieces = [unavailable(body, UNREAD)]
                size = 0
            if held is not None:
                start, held = held, None
                await send(start if pieces is None else _resized(start, None if more else sum(map(len, pieces))))
            if pieces is None:
                await send(message)
                return
            try:
                for index, piece in enumerate(pieces):
                    for at in range(0, max(len(piece), 1), SEND_SLICE_BYTES):
                        last = index == len(pieces) - 1 and at + SEND_SLICE_BYTES >= len(piece)
                        await send({"type": "http.response.body", "more_body": more or not last,
                                    "body": piece if len(piece) <= SEND_SLICE_BYTES else piece[at:at + SEND_SLICE_BYTES]})
            finally:
                self.unsent.give(caller, size)
            written = sum(map(len, pieces))
            del pieces  # its bytes are freed before ``written`` (a heap trim) runs
            await self.answers.after_writing(written)

        try:
            await self.app(scope, receive, write)
        finally:
            self.answers.release(scope)  # an answer parked for a request gone is never written
        if held is not None:  # headers without a body
            await send(held)


def _streamed(start: dict[str, Any]) -> bool:
    return any(key.lower() == b"content-type" and value.startswith(b"text/event-stream")
               for key, value in start.get("headers", []))


def _resized(start: dict[str, Any], length: int | None) -> dict[str, Any]:
    """``start`` with its Content-Length set to ``length`` (dropped when None: sent chunked)."""
    headers: Iterable[tuple[bytes, bytes]] = [(k, v) for k, v in start.get("headers", [])
                                               if k.lower() != b"content-length"]
    if length is not None:
        headers = [*headers, (b"content-length", str(length).encode("ascii"))]
    return {**start, "headers": list(headers)}

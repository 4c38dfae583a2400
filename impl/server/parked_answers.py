"""Tool answers over streamable HTTP are encoded in a worker thread, never on the event loop.

Left to itself the SDK turns a handler's ``CallToolResult`` into wire bytes on the event loop: it
dumps and re-validates the result, dumps the JSON-RPC response to JSON, and sse-starlette scans
that text for line breaks. For a 55 MiB answer that is about 7 s in which ``/healthz`` and every
other client wait. So over HTTP the tool handler encodes the whole SSE event in a worker thread,
parks the bytes here under a random token, and hands the SDK a placeholder result that carries only
the token (``_meta``); the session's transport, when it frames that placeholder's response, writes
the parked bytes instead (``answer_from_parked``). Nothing else changes on the wire: the event
carries the JSON value the SDK would have written, framed the same way.

Only 2025-era sessions are served this way: the 2026 single-exchange path frames its answers
itself, and the app never enables the SDK's JSON-response mode.
"""

from __future__ import annotations

import secrets
import threading
import time
from functools import wraps
from typing import Any

import mcp.types as types
from mcp_types.methods import serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from knowspec.impl.server.sliced_json import json_pieces

PARKED_KEY = "knowspec/parked-answer"
SSE_SEPARATOR = b"\r\n"  # sse-starlette's default, which the SDK's EventSourceResponse keeps
MAX_PARKED_SECONDS = 300.0  # an answer whose client went away is dropped after this long


def encode_answer(request_id: types.RequestId, protocol_version: str, result: types.CallToolResult) -> bytes:
    """The SSE event the SDK would write for ``result``: same result shaping, same JSON, same framing.

    The SDK's shaping runs on a copy without the heavy values (text, structured content), which
    are then put back and encoded in short slices (``sliced_json``), so the GIL is never held
    long. What slicing cannot encode is left to pydantic, as the SDK would do it.
    """
    light = result.model_copy(update={
        "content": [c.model_copy(update={"text": ""}) if isinstance(c, types.TextContent) else c for c in result.content],
        "structured_content": None if result.structured_content is None else {},
    })
    shaped = serialize_server_result("tools/call", protocol_version,
                                     light.model_dump(by_alias=True, mode="json", exclude_none=True))
    for index, item in enumerate(result.content):
        if isinstance(item, types.TextContent):
            shaped["content"][index]["text"] = item.text
    if result.structured_content is not None:
        shaped["structuredContent"] = result.structured_content
    message = {"jsonrpc": "2.0", "id": request_id, "result": shaped}
    try:
        return _event([piece.encode("utf-8") for piece in json_pieces(message)])
    except (TypeError, ValueError):
        full = serialize_server_result("tools/call", protocol_version,
                                       result.model_dump(by_alias=True, mode="json", exclude_none=True))
        return _event([types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=full).model_dump_json(
            by_alias=True, exclude_unset=True).encode("utf-8")])


def _event(body: list[bytes]) -> bytes:
    """One SSE ``message`` event around ``body``, joined once (every copy of a big answer costs)."""
    return b"".join([b"event: message", SSE_SEPARATOR, b"data: ", *body, SSE_SEPARATOR, SSE_SEPARATOR])


def parks_answers_for(protocol_version: str) -> bool:
    """Whether a call on a session of this protocol version goes through the parked path."""
    return protocol_version not in MODERN_PROTOCOL_VERSIONS


class ParkedAnswers:
    """Encoded answers waiting for their transport to write them; thread-safe."""

    def __init__(self, max_age: float = MAX_PARKED_SECONDS, clock=time.monotonic):
        self._parked: dict[str, tuple[float, bytes]] = {}
        self._lock = threading.Lock()
        self._max_age = max_age
        self._clock = clock

    def park(self, frame: bytes) -> types.CallToolResult:
        """Keep ``frame``; return the placeholder result the SDK carries to the transport."""
        token = secrets.token_hex(16)
        now = self._clock()
        with self._lock:
            for stale in [t for t, (at, _) in self._parked.items() if now - at > self._max_age]:
                del self._parked[stale]
            self._parked[token] = (now, frame)
        return types.CallToolResult(content=[], _meta={PARKED_KEY: token})

    def take(self, message: Any) -> bytes | None:
        """The parked frame a response ``message`` stands for (removed); None if it is not a placeholder."""
        if not isinstance(message, types.JSONRPCResponse):
            return None
        meta = message.result.get("_meta")
        token = meta.get(PARKED_KEY) if isinstance(meta, dict) else None
        if not isinstance(token, str):
            return None
        with self._lock:
            _, frame = self._parked.pop(token, (0.0, None))
        if frame is None:  # dropped as stale: say so rather than write a placeholder
            error = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=types.ErrorData(
                code=types.INTERNAL_ERROR, message="the answer was no longer available"))
            frame = _event([error.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")])
        return frame

    def __len__(self) -> int:
        return len(self._parked)


def answer_from_parked(session_manager: Any, answers: ParkedAnswers) -> None:
    """Make every session transport ``session_manager`` admits write parked frames for placeholders.

    The seam is the SDK transport's ``_create_event_data`` (one SSE event per outgoing message): an
    event may be bytes, which sse-starlette writes as they are. Wrapped per transport instance,
    as the manager creates them.
    """
    admit = session_manager._admit_session

    @wraps(admit)
    def admit_answering_from_parked(*args: Any, **kwargs: Any):
        transport = admit(*args, **kwargs)
        if transport is not None:
            event_data = transport._create_event_data

            def create_event_data(event_message):
                frame = answers.take(event_message.message)
                if frame is None:
                    return event_data(event_message)
                if event_message.event_id:  # only with an event store, which the app does not use
                    frame = b"id: " + event_message.event_id.encode("utf-8") + SSE_SEPARATOR + frame
                return frame

            transport._create_event_data = create_event_data
        return transport

    session_manager._admit_session = admit_answering_from_parked

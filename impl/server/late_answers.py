"""A second answer to one ``/mcp`` request is dropped, and the SDK's log of why is one line.

A client that ends its session (an HTTP DELETE, or it just leaves) while its
``notifications/initialized`` is still on the way races the SDK: the notification is answered
202, then handed to a session that has closed; the SDK logs ``Error handling POST request``
with the traceback of ``anyio.ClosedResourceError``, sends a 500 for the same request and
raises the same error again out of the app. uvicorn refuses a response after the response,
logs ``Exception in ASGI application`` with ~50 more lines and closes the connection, so the
client's next request on that keep-alive connection failed too. Seen with the SDK's own client
exiting right after ``initialize`` (mcp 2.3).

:class:`OneAnswer` lets the first complete response through, drops what follows and the
session's closed stream raised after it; :class:`EndedSessionRecords` turns the SDK's record of
that case into one line at INFO.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

log = logging.getLogger("knowspec.http")
SDK_LOGGER = "mcp.server.streamable_http"
SDK_MESSAGE = "Error handling POST request"  # the record the SDK makes when it cannot hand a message on
ENDED = "a message arrived for an MCP session that had just ended; it was dropped"


class OneAnswer:
    """ASGI middleware for ``path``: nothing is sent after a response's last body message."""

    def __init__(self, app: Any, path: str = "/mcp") -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        done = False

        async def once(message: dict[str, Any]) -> None:
            nonlocal done
            if done:
                log.debug("dropped %s sent after the response to %s %s was complete",
                          message.get("type"), scope.get("method"), self.path)
                return
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                done = True
            await send(message)

        try:
            await self.app(scope, receive, once)
        except anyio.ClosedResourceError:
            if not done:
                raise
            # the SDK passing the same failure on to the ended session: nothing left to tell anyone
            log.debug("the ended session's stream was closed after the answer to %s %s", scope.get("method"), self.path)


class EndedSessionRecords(logging.Filter):
    """The SDK's ``Error handling POST request`` for a message whose session had closed becomes
    ``ENDED`` at INFO, without its traceback, shown only where INFO is (the logger's level was
    checked before the record was made, at ERROR); every other record passes as it is, the
    SDK's other records of a closed stream included."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.msg != SDK_MESSAGE or not isinstance(error, anyio.ClosedResourceError):
            return True
        record.msg, record.args = ENDED, ()
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


def install() -> None:
    """Filter the SDK's streamable-HTTP logger (once per process)."""
    logger = logging.getLogger(SDK_LOGGER)
    if not any(isinstance(f, EndedSessionRecords) for f in logger.filters):
        logger.addFilter(EndedSessionRecords())

"""The one error type a tool raises, and the diagnostic shape it carries.

Every tool failure travels as ``ToolError`` up to the call pipeline, which turns it into an
``isError: true`` result whose ``structuredContent`` is the envelope
``{code, message, retryable, diagnostics}`` (``spec/common/error.schema.json``). Protocol faults
(unknown tool, malformed request) are the only failures that become JSON-RPC errors; the
transport edge decides that, never a handler or the pipeline: ``impl/server/mcp_server.py``
(unknown tool), ``impl/server/stdio_transport.py`` (a line that is not one JSON-RPC message)
and ``impl/server/body_limits.py`` (an oversized or stalled ``/mcp`` body).

Codes used across the server (see ``spec/errors.toml`` for the full table):
``schema_validation``, ``resource_limit``, ``invalid_request``, ``operation_cancelled``,
``operation_rejected``, ``concept_not_found``, ``not_found``, ``not_implemented``,
``revision_conflict``, ``plan_mismatch``, ``embedding_unavailable``, ``storage_error``.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, Iterable, Iterator

Diagnostic = dict[str, Any]


def diagnostic(
    code: str,
    message: str,
    *,
    severity: str = "ERROR",
    file: str = "",
    field: str = "",
    spec_ref: str = "",
    policy_failure: bool = False,
) -> Diagnostic:
    """A diagnostic in the envelope's closed shape (all seven keys always present)."""
    return {
        "code": code,
        "severity": severity,
        "file": file,
        "field": field,
        "message": message,
        "spec_ref": spec_ref,
        "policy_failure": policy_failure,
    }


@functools.cache
def _retryable_table() -> dict[str, bool]:
    """``retryable`` of every code in ``spec/errors.toml``, as codegen wrote it to contract.json."""
    text = (resources.files("knowspec.generated") / "contract.json").read_text(encoding="utf-8")
    codes = json.loads(text).get("error_codes", {})
    return {code: bool(entry.get("retryable", False)) for code, entry in codes.items()}


def default_retryable(code: str) -> bool:
    """The spec's ``retryable`` for ``code`` (``False`` for a code the spec does not list)."""
    return _retryable_table().get(code, False)


class ToolError(Exception):
    """A contract-shaped tool failure: becomes an ``isError`` result, never a crash.

    ``retryable`` defaults to the code's value in ``spec/errors.toml`` (one source of truth);
    a raiser passes it only where the contract says this case differs (a locked bundle).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool | None = None,
        diagnostics: Iterable[Diagnostic] = (),
        text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = default_retryable(code) if retryable is None else retryable
        self.diagnostics = list(diagnostics)
        # Text content to send instead of the message (the OKF parse-error envelope uses it).
        self.text = text

    def detached(self) -> "ToolError":
        """The same answer as a new error without a traceback: one kept to be raised again
        (a refusal remembered per snapshot revision) must not hold the frames of the work
        that refused, nor gather a traceback each time it is raised."""
        return ToolError(self.code, self.message, retryable=self.retryable, diagnostics=self.diagnostics,
                         text=self.text)


def cancelled(operation: str) -> ToolError:
    return ToolError("operation_cancelled", f"{operation} was cancelled", retryable=True)


def not_implemented(tool: str) -> ToolError:
    return ToolError(
        "not_implemented",
        f"tool {tool} is specified but not implemented yet in this server",
    )


def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during, each once (a chain may loop)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__

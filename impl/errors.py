"""The one error type a tool raises, and the diagnostic shape it carries.

Every tool failure travels as ``ToolError`` up to the call pipeline, which turns it into an
``isError: true`` result whose ``structuredContent`` is the envelope
``{code, message, retryable, diagnostics}`` (``spec/common/error.schema.json``). Protocol faults
(unknown tool, malformed request) are the only failures that become JSON-RPC errors, and that
choice is made in one place: ``impl/server/pipeline.py``.

Codes used across the server (see ``spec/errors.toml`` for the full table):
``schema_validation``, ``resource_limit``, ``invalid_request``, ``operation_cancelled``,
``operation_rejected``, ``concept_not_found``, ``not_found``, ``not_implemented``,
``revision_conflict``, ``plan_mismatch``, ``embedding_unavailable``, ``storage_error``.
"""

from __future__ import annotations

from typing import Any, Iterable

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


class ToolError(Exception):
    """A contract-shaped tool failure: becomes an ``isError`` result, never a crash."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        diagnostics: Iterable[Diagnostic] = (),
        text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.diagnostics = list(diagnostics)
        # Text content to send instead of the message (the OKF parse-error envelope uses it).
        self.text = text


def cancelled(operation: str) -> ToolError:
    return ToolError("operation_cancelled", f"{operation} was cancelled", retryable=True)


def not_implemented(tool: str) -> ToolError:
    return ToolError(
        "not_implemented",
        f"tool {tool} is specified but not implemented yet in this server",
    )

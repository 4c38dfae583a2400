"""Read-side ``ToolError``s shared by every OKF read tool (spec/okf/contract/read.md §4.3, gaps.md §3.2)."""

from __future__ import annotations


from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.rules import go_json

PARSE_MESSAGE = "unparseable concept document; inspect its frontmatter and encoding"
ROOT_INDEX_PARSE_MESSAGE = "unparseable root index document; inspect its frontmatter and encoding"
MAX_PARSE_DIAGNOSTICS = 64
_PARSE_CODES = {"invalid_encoding", "unterminated_frontmatter", "invalid_frontmatter"}
_MAX_FIELD_BYTES = 512
_LONG_MESSAGE = "diagnostic message exceeds MCP output limit; inspect the bundle locally"


def parse_failure(errors, message: str = PARSE_MESSAGE) -> ToolError:
    """``operation_rejected`` with one diagnostic per parse error; text is the legacy JSON."""
    errors = list(errors)
    if len(errors) > MAX_PARSE_DIAGNOSTICS:
        return ToolError("resource_limit", "bundle parse diagnostics exceed MCP output limits")
    if len(message.encode("utf-8")) > _MAX_FIELD_BYTES:
        message = _LONG_MESSAGE
    structured = []
    legacy = []
    for err in errors:
        code = err.code if err.code in _PARSE_CODES else "operation_rejected"
        file = err.file if len(err.file.encode("utf-8")) <= _MAX_FIELD_BYTES else ""
        structured.append(diagnostic(code, message, file=file))
        legacy.append({"code": code, "severity": "ERROR", "file": file, "message": message})
    text = go_json.dumps({"status": "error", "diagnostics": legacy})
    return ToolError("operation_rejected", "tool operation was rejected", diagnostics=structured, text=text)


def recovery_step(field: str, message: str) -> dict:
    return diagnostic("recovery_step", message, severity="INFO", field=field)


def concept_not_found(concept_id: str) -> ToolError:
    return ToolError(
        "concept_not_found",
        f"concept not found: {concept_id}",
        diagnostics=[recovery_step("concept_id", "Use list_concepts or search_concepts to find a current concept ID.")],
    )


def too_many_concepts(message: str = "bundle contains too many concepts", extra: str = "") -> ToolError:
    advice = "The selected bundle has too many concepts; use a smaller bundle." + extra
    return ToolError("resource_limit", message, diagnostics=[recovery_step("bundle_path", advice)])

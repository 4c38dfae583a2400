"""``write_concept``: compatibility whole-document create/replace (spec/okf/contract/write.md §3).

No preview and no caller token: the identity is derived from the content and the resolved
version policy, so an identical retry replays the first receipt; the base revision comes from
a fresh snapshot and a conflict is retried twice before it is reported.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from knowspec.generated.models.okf.write_concept_input_schema import WriteConceptInput
from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.okf.read_errors import recovery_step
from knowspec.impl.okf.write import bundle_io
from knowspec.impl.okf.write.changeset import ChangeSet
from knowspec.impl.okf.write.encoding import enc_str, sha256_hex, digest_string
from knowspec.impl.okf.write.inputs import invalid
from knowspec.impl.okf.write.paths import concept_id_problem, concept_path, is_revision_path
from knowspec.impl.okf.write.plan import Plan
from knowspec.impl.okf.write.planner import staged_validation
from knowspec.impl.okf.write.revision import revision_of
from knowspec.impl.okf.write.store_errors import commit_or_raise
from knowspec.impl.rules import go_json

ACTOR = "okf-mcp"
ATTEMPTS = 3
MAX_FRONTMATTER_BYTES = 1 << 20
MAX_BODY_BYTES = 16 << 20


class _Retry(Exception):
    pass


def _decode(args: WriteConceptInput) -> tuple[str, str, str, str]:
    concept_id, fm, body = args.concept_id, args.frontmatter, args.body
    problem = concept_id_problem(concept_id)
    if problem:
        raise invalid(problem)
    try:
        fm_size, body_size = len(fm.encode("utf-8")), len(body.encode("utf-8"))
    except UnicodeEncodeError:
        raise invalid("concept content must be valid UTF-8") from None
    if fm_size > MAX_FRONTMATTER_BYTES or body_size > MAX_BODY_BYTES:
        raise ToolError("resource_limit", "concept content exceeds the MCP transport limit")
    return args.bundle_path, concept_id, fm, body


def _check_frontmatter(fm: str) -> None:
    from knowspec.impl.okf.parsing.frontmatter import FrontmatterError, YamlLimitError, load_yaml_mapping

    try:
        load_yaml_mapping(fm)
    except YamlLimitError:
        raise ToolError("resource_limit", "concept frontmatter exceeds the YAML limits") from None
    except FrontmatterError:
        raise ToolError("invalid_request", "invalid concept frontmatter", diagnostics=[recovery_step(
            "frontmatter", "Send YAML frontmatter text without --- fences that parses as a mapping.")]) from None


_OPEN_FENCES = ("---\n", "---\r\n")
_CLOSE_FENCES = ("---", "---\n", "---\r\n", "...", "...\n", "...\r\n")


def unfenced(fm: str) -> str:
    """The YAML of a frontmatter argument, without the ``---`` fences a caller may have kept.

    okf-mcp parses the argument as one YAML document, so an opening ``---`` and a closing
    ``---``/``...`` line are document markers, not content (spec/okf/NOTES.md#written-layout).
    """
    if fm.startswith(_OPEN_FENCES):
        fm = fm.split("\n", 1)[1]
        head, _, last = fm.rstrip("\n").rpartition("\n")
        if last + "\n" in _CLOSE_FENCES or last in _CLOSE_FENCES:
            fm = head + "\n" if head else ""
    return "" if not fm.strip() else fm


def serialize(fm: str, body: str) -> bytes:
    """okf-mcp's layout: fences, a blank line after the closing one, a newline-terminated body."""
    if fm and not fm.endswith("\n"):
        fm += "\n"
    if not body.endswith("\n"):
        body += "\n"
    return ("---\n" + fm + "---\n\n" + body).encode("utf-8")


def _check_round_trip(data: bytes, fm: str) -> None:
    """The written document must split back into exactly the given frontmatter (a ``---``
    line inside the frontmatter text would otherwise smuggle YAML into the body)."""
    from knowspec.impl.okf.write.document import split_document

    doc = split_document(data)
    if doc.frontmatter != (fm if not fm or fm.endswith("\n") else fm + "\n"):
        raise ToolError("invalid_request", "concept frontmatter cannot be serialized as one document",
                        diagnostics=[recovery_step("frontmatter", "Remove --- delimiter lines from the frontmatter.")])


def _version_policy(files: Mapping[str, bytes]) -> tuple[str, str, str, str]:
    from knowspec.impl.okf.model import document_for
    from knowspec.impl.okf.bundle.version import resolve_version

    raw = files.get("index.md")
    res = resolve_version(document_for("index.md", raw) if raw is not None else None)
    v = res.version
    return (v.get("declared") or "", v.get("effective") or "", v.get("resolution") or "",
            v.get("compatibility") or "")


def identity(concept_id: str, fm: str, body: str, policy: tuple[str, str, str, str]) -> str:
    fields = ("okf-mcp:write-concept:v3", concept_id, fm, body, *policy)
    return "mcp-replace-" + sha256_hex(b"".join(enc_str(f) for f in fields))


def _rejection(path: str, problems: list[dict]) -> ToolError:
    diags = [diagnostic("operation_rejected", p["message"], severity=p["severity"], file=p["file"]) for p in problems]
    text = go_json.dumps({"status": "rejected", "path": path, "diagnostics": [
        {"code": "operation_rejected", "severity": d["severity"], "file": d["file"], "message": d["message"]}
        for d in diags]})
    return ToolError("operation_rejected", "tool operation was rejected", diagnostics=diags, text=text)


def _conflict() -> Exception:
    return _Retry()


def write_concept(args: WriteConceptInput, check: Callable[[], None]) -> dict[str, Any]:
    bundle_path, concept_id, fm, body = _decode(args)
    yaml_text = unfenced(fm)
    _check_frontmatter(yaml_text)
    data = serialize(yaml_text, body)
    _check_round_trip(data, yaml_text)
    path = concept_path(concept_id)
    if not is_revision_path(path):
        raise invalid("concept_id does not name a writable bundle path")
    with bundle_io.pinned(bundle_path) as root_fd:
        bundle_io.finish_interrupted(root_fd)
        for _attempt in range(ATTEMPTS):
            check()
            files, base = bundle_io.capture(root_fd, check=check)
            blocking, advisory = staged_validation(files, {path: data}, check=check)
            if blocking:
                raise _rejection(path, blocking + advisory)
            change_id = identity(concept_id, fm, body, _version_policy(files))
            digest = digest_string(b"".join(enc_str(f) for f in (
                "okf:replace-concept:v1", change_id, ACTOR, concept_id)) + enc_str(data.decode("utf-8")))
            post = dict(files)
            post[path] = data
            writes = {} if files.get(path) == data else {path: data}
            plan = Plan(digest, base, revision_of(post), (path,), writes, {path: files.get(path)},
                        affected_refs=(concept_id,))
            cs = ChangeSet(change_id, ACTOR, base, ())
            try:
                commit_or_raise(root_fd, cs, change_id, digest, plan, check,
                                conflict=_conflict, mismatch=_mismatch, check_base=False)
            except _Retry:
                continue
            return {"status": "success", "path": path, "diagnostics": [
                {"severity": d["severity"], "file": d["file"], "message": d["message"]} for d in advisory]}
    raise ToolError("revision_conflict", "bundle kept changing while writing the concept", retryable=True,
                    diagnostics=[recovery_step("bundle_path", "Retry the same write once other writers finish.")])


def _mismatch() -> ToolError:
    return ToolError("plan_mismatch", "write receipt does not match the request")


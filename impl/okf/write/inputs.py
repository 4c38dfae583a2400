"""Decode and check patch arguments beyond the JSON Schema (spec/okf/contract/write.md §4.1, Go-side rules).

The call pipeline validates against the schema first and hands over the generated input model,
so the profile and the number of operations (1 to 256) are taken as given; the operations
themselves are still checked here, and so are the rules a schema cannot state: byte
lengths, control characters, actor grammar, canonical decimals, profile-specific dates,
window order. Every failure is ``invalid_request`` naming ``operations[i]`` (byte caps on
actors are ``resource_limit``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from knowspec.generated.constants import TEMPORAL_PROFILE_INSTANT
from knowspec.generated.models.okf.apply_concept_patch_input_schema import ApplyConceptPatchInput
from knowspec.generated.models.okf.preview_concept_patch_input_schema import PreviewConceptPatchInput
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write.changeset import OPERATION_KINDS, Operation
from knowspec.impl.okf.write.paths import concept_id_problem

MAX_ARGUMENT_BYTES = 16 << 20
MAX_ACTOR_BYTES = 256
MAX_TEXT_BYTES = 4096
PAYLOADS = ("generated", "verification", "source", "source_id", "usage_window", "lifecycle",
            "attested_computation", "version")
_ALLOWED = {
    "set_generated": {"generated"}, "ensure_verification": {"verification"},
    "remove_verification": {"verification"}, "put_source": {"source"},
    "remove_source": {"source", "source_id"}, "set_usage_window": {"usage_window", "source", "source_id"},
    "set_lifecycle": {"lifecycle"}, "put_attested_computation": {"attested_computation"},
    "set_bundle_version": {"version"},
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_INSTANT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$")
_UINT = re.compile(r"^(0|[1-9][0-9]*)$")


def plain(value: Any) -> Any:
    """pydantic models / namespaces / enums -> JSON-like data (explicit nulls kept)."""
    if hasattr(value, "model_dump"):
        return plain(value.model_dump(mode="json", by_alias=True, exclude_unset=True))
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: plain(v) for k, v in vars(value).items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "value") and type(value).__module__ != "builtins":
        return value.value
    return value


def invalid(message: str) -> ToolError:
    return ToolError("invalid_request", message)


def check_text(where: str, value: Any, *, limit: int = MAX_TEXT_BYTES, required: bool = True) -> str:
    if not isinstance(value, str) or (required and value.strip() == ""):
        raise invalid(f"{where} must be a non-empty string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise invalid(f"{where} must be valid UTF-8") from None
    if size > limit:
        raise invalid(f"{where} is longer than {limit} bytes")
    if _CONTROL.search(value):
        raise invalid(f"{where} must not contain control characters")
    return value


def valid_actor(actor: str) -> bool:
    if not actor or actor != actor.strip() or _CONTROL.search(actor):
        return False
    for prefix in ("human:", "process:"):
        if actor.startswith(prefix):
            return actor[len(prefix):].strip() != ""
    left, sep, right = actor.partition("/")
    return bool(sep) and "/" not in right and left.strip() != "" and right.strip() != ""


def check_actor(where: str, actor: Any, *, grammar: bool) -> str:
    if not isinstance(actor, str) or actor == "":
        raise invalid(f"{where} must not be empty")
    if len(actor.encode("utf-8", "surrogatepass")) > MAX_ACTOR_BYTES:
        raise ToolError("resource_limit", "tool input exceeds the advertised schema limits")
    check_text(where, actor, limit=MAX_ACTOR_BYTES)
    if actor != actor.strip() or (grammar and not valid_actor(actor)):
        raise invalid(f"{where} must be human:<name>, process:<name> or <producer>/<version>")
    return actor


def is_rfc3339(value: Any) -> bool:
    if not isinstance(value, str) or not _INSTANT.match(value) or value.endswith("-00:00"):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


def is_calendar_date(value: Any) -> bool:
    try:
        return isinstance(value, str) and date.fromisoformat(value).isoformat() == value and len(value) == 10
    except ValueError:
        return False


def _temporal(where: str, value: Any, profile: str) -> Any:
    ok = is_rfc3339(value) if profile == TEMPORAL_PROFILE_INSTANT else is_calendar_date(value)
    if not ok:
        shape = "an RFC3339 instant with offset" if profile == TEMPORAL_PROFILE_INSTANT else "YYYY-MM-DD"
        raise invalid(f"{where} must be {shape}")
    return value


def _order_key(value: str, profile: str) -> Any:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if profile == TEMPORAL_PROFILE_INSTANT else value


def _window(where: str, w: Any, profile: str) -> dict:
    if not isinstance(w, dict) or set(w) != {"from", "to"}:
        raise invalid(f"{where} must be {{from, to}}")
    _temporal(f"{where}.from", w["from"], profile)
    _temporal(f"{where}.to", w["to"], profile)
    if _order_key(w["from"], profile) > _order_key(w["to"], profile):
        raise invalid(f"{where}.from must not be after {where}.to")
    return w


def _source(where: str, s: Any, profile: str) -> dict:
    if not isinstance(s, dict):
        raise invalid(f"{where} must be an object")
    check_text(f"{where}.resource", s.get("resource"))
    for key in ("id", "title", "author"):
        if s.get(key) is not None:
            check_text(f"{where}.{key}", s[key])
    if s.get("usage_count") is not None:
        count = s["usage_count"]
        if not isinstance(count, str) or not _UINT.match(count) or int(count) >= 1 << 64:
            raise invalid(f"{where}.usage_count must be a canonical unsigned decimal")
    if s.get("last_modified") is not None:
        _temporal(f"{where}.last_modified", s["last_modified"], profile)
    if s.get("usage_window") is not None:
        _window(f"{where}.usage_window", s["usage_window"], profile)
    return s


def check_computation(where: str, c: Any) -> None:
    if not isinstance(c, dict) or c.get("mode") not in ("inline", "file"):
        raise invalid(f"{where}.mode must be inline or file")
    check_text(f"{where}.runtime", c.get("runtime"))
    params = c.get("parameters")
    if not isinstance(params, list) or len(params) > 256:
        raise invalid(f"{where}.parameters must be a list of at most 256 items")
    names = [check_text(f"{where}.parameters[{i}].name", p.get("name")) for i, p in enumerate(params)]
    for i, p in enumerate(params):
        check_text(f"{where}.parameters[{i}].type", p.get("type"))
        if not isinstance(p.get("required", False), bool):
            raise invalid(f"{where}.parameters[{i}].required must be a boolean")
    if len(set(names)) != len(names):
        raise invalid(f"{where}.parameters names must be unique")
    if c["mode"] == "file":
        if c.get("inline_computation") is not None or c.get("inline_language") is not None:
            raise invalid(f"{where}: file mode forbids inline fields")
        check_text(f"{where}.computation_path", c.get("computation_path"))
    else:
        if c.get("computation_path") is not None:
            raise invalid(f"{where}: inline mode forbids computation_path")
        code = c.get("inline_computation")
        if not isinstance(code, str) or code.strip() == "" or "\x00" in code or len(code.encode()) > 1 << 20:
            raise invalid(f"{where}.inline_computation must be non-empty code without NUL")
        if c.get("inline_language") is not None:
            check_text(f"{where}.inline_language", c["inline_language"])
    executor = c.get("executor") or {}
    check_text(f"{where}.executor.resource", executor.get("resource"))
    receipt = executor.get("receipt")
    if not isinstance(receipt, list) or not 1 <= len(receipt) <= 256:
        raise invalid(f"{where}.executor.receipt must list 1..256 fields")
    for i, field_name in enumerate(receipt):
        check_text(f"{where}.executor.receipt[{i}]", field_name)
    if len(set(receipt)) != len(receipt):
        raise invalid(f"{where}.executor.receipt fields must be unique")
    check_text(f"{where}.attester.resource", (c.get("attester") or {}).get("resource"))


def check_operation(i: int, op: Any, profile: str) -> Operation:
    where = f"operations[{i}]"
    if not isinstance(op, dict) or op.get("kind") not in OPERATION_KINDS:
        raise invalid(f"{where}.kind is not a supported operation kind")
    op = {k: v for k, v in op.items()
          if v is not None or (k == "usage_window" and op["kind"] == "set_usage_window")}
    kind = op["kind"]
    extra = (set(op) & set(PAYLOADS)) - _ALLOWED[kind]
    if extra or set(op) - set(PAYLOADS) - {"kind", "concept_id"}:
        raise invalid(f"{where} carries fields that {kind} does not take")
    if kind == "set_bundle_version":
        if "concept_id" in op or op.get("version") not in ("0.1", "0.2"):
            raise invalid(f"{where}: set_bundle_version takes only version 0.1 or 0.2")
        return op
    problem = concept_id_problem(op.get("concept_id") or "")
    if problem:
        raise invalid(f"{where}.concept_id: {problem}")
    if kind == "set_generated":
        g = op.get("generated") or {}
        check_actor(f"{where}.generated.by", g.get("by"), grammar=True)
        if g.get("at") is not None and not is_rfc3339(g["at"]):
            raise invalid(f"{where}.generated.at must be RFC3339")
    elif kind in ("ensure_verification", "remove_verification"):
        v = op.get("verification") or {}
        check_actor(f"{where}.verification.by", v.get("by"), grammar=True)
        if not is_rfc3339(v.get("at")):
            raise invalid(f"{where}.verification.at must be RFC3339")
    elif kind == "put_source":
        _source(f"{where}.source", op.get("source"), profile)
    elif kind in ("remove_source", "set_usage_window"):
        has_id, has_src = op.get("source_id") is not None, op.get("source") is not None
        if has_id and has_src or (kind == "remove_source" and not (has_id or has_src)):
            raise invalid(f"{where} needs exactly one of source_id or source")
        if has_id:
            check_text(f"{where}.source_id", op["source_id"])
        if has_src:
            if op["source"].get("id"):
                raise invalid(f"{where}.source must not carry id; use source_id")
            _source(f"{where}.source", op["source"], profile)
        if kind == "set_usage_window":
            if "usage_window" not in op:
                raise invalid(f"{where}.usage_window is required (null removes it)")
            if op["usage_window"] is not None:
                _window(f"{where}.usage_window", op["usage_window"], profile)
    elif kind == "set_lifecycle":
        lc = op.get("lifecycle")
        if not isinstance(lc, dict) or lc.get("status") not in (None, "draft", "stable", "deprecated"):
            raise invalid(f"{where}.lifecycle.status must be draft, stable, deprecated or null")
        if lc.get("stale_after") is not None:
            _temporal(f"{where}.lifecycle.stale_after", lc["stale_after"], profile)
    elif kind == "put_attested_computation":
        check_computation(f"{where}.attested_computation", op.get("attested_computation"))
    return op


@dataclass(frozen=True)
class PatchArgs:
    bundle_path: str
    actor: str
    profile: str
    operations: tuple[Operation, ...]


def decode_patch(args: PreviewConceptPatchInput | ApplyConceptPatchInput) -> PatchArgs:
    data = plain(args)
    if len(json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogatepass")) > MAX_ARGUMENT_BYTES:
        raise ToolError("resource_limit", "tool input exceeds the advertised schema limits")
    profile = args.temporal_profile
    actor = check_actor("actor", data.get("actor"), grammar=False)
    ops = data["operations"]
    checked = tuple(check_operation(i, op, profile) for i, op in enumerate(ops))
    return PatchArgs(data.get("bundle_path") or "", actor, profile, checked)

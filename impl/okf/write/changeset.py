"""Patch operations as plain data, their canonical change-set bytes and the request digest.

A change set is ``{version 1, id, actor, base_revision, operations}``; its canonical bytes
(spec/okf/contract/write.md §2.2) bind a request to exactly these operations, and the adapter-minted id
(spec/okf/contract/write.md §2.5) is derived from a revision-independent sentinel so that the same operations get the
same id on every preview and apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from knowspec.impl.okf.write.encoding import (
    ZERO_REVISION,
    digest_string,
    enc_bool,
    enc_bytes,
    enc_str,
    u64,
)

OPERATION_KINDS = (
    "set_generated",
    "ensure_verification",
    "remove_verification",
    "put_source",
    "remove_source",
    "set_usage_window",
    "set_lifecycle",
    "put_attested_computation",
    "set_bundle_version",
)
PATCH_ID_SENTINEL = "mcp-patch-identity-sentinel-v1"

Operation = dict[str, Any]  # the schema's operation object, unset payload fields absent


@dataclass(frozen=True)
class ChangeSet:
    id: str
    actor: str
    base_revision: str
    operations: tuple[Operation, ...]
    version: int = 1


def _source_bytes(source: dict) -> bytes:
    out = enc_str(source.get("id") or "") + enc_str(source.get("resource") or "")
    out += enc_str(source.get("title") or "") + enc_str(source.get("author") or "")
    count = source.get("usage_count")
    out += enc_bool(count is not None) + (u64(int(count)) if count is not None else b"")
    out += enc_str(source.get("last_modified") or "")
    window = source.get("usage_window")
    out += enc_bool(window is not None)
    if window is not None:
        out += enc_str(window["from"]) + enc_str(window["to"])
    return out


def _selector_bytes(op: Operation) -> bytes | None:
    if op.get("source_id") is not None:
        return enc_str("id") + enc_str(op["source_id"])
    if op.get("source") is not None:
        return enc_str("exact") + _source_bytes(op["source"])
    return None


def _contract_bytes(c: dict) -> bytes:
    out = enc_str(c["mode"]) + enc_str(c["runtime"])
    params = c.get("parameters") or []
    out += u64(len(params))
    for p in params:
        out += enc_str(p["name"]) + enc_str(p["type"]) + enc_bool(bool(p.get("required")))
    out += enc_str(c.get("computation_path") or "")
    out += enc_str(c.get("inline_computation") or "")
    out += enc_str(c.get("inline_language") or "")
    executor = c.get("executor") or {}
    out += enc_str(executor.get("resource") or "")
    receipt = executor.get("receipt") or []
    out += u64(len(receipt)) + b"".join(enc_str(r) for r in receipt)
    out += enc_str((c.get("attester") or {}).get("resource") or "")
    return out


def _migration_bytes(op: Operation) -> bytes:
    """Collections arrive pre-sorted (by path; entries by number, exact entry, source id)."""
    out = enc_str(op["generated_by"]) + enc_str(op["timestamp_policy"]) + enc_str(op["timestamp_conflict"])
    out += u64(len(op["generated_at"])) + b"".join(enc_str(p) + enc_str(at) for p, at in op["generated_at"])
    out += u64(len(op["citations"]))
    for path, entries in op["citations"]:
        out += enc_str(path) + u64(len(entries))
        for e in entries:
            out += u64(e.get("legacy_number") or 0) + enc_str(e.get("legacy_entry") or "")
            out += enc_str(e["source_id"]) + enc_str(e.get("title") or "") + enc_str(e.get("resource") or "")
    out += u64(len(op["computations"]))
    for path, contract, asset in op["computations"]:
        out += enc_str(path) + _contract_bytes(contract) + enc_bool(asset is not None)
        if asset is not None:
            out += enc_str(asset["path"]) + enc_bytes(asset["content"].encode("utf-8"))
    return out


def operation_bytes(op: Operation) -> bytes:
    """Tag (the kind) first, then the kind's fields in the frozen order."""
    kind = op["kind"]
    out = enc_str(kind)
    if kind == "upgrade_temporal_concept":
        rewrites = sorted(op["rewrites"], key=lambda r: r["path"].encode("utf-8"))
        out += enc_str(op["concept_id"]) + u64(len(rewrites))
        return out + b"".join(enc_str(r["path"]) + enc_str(r["from"]) + enc_str(r["to"]) for r in rewrites)
    if kind == "set_bundle_version":
        return out + enc_str(op["version"])
    if kind == "migrate_v01_to_v02":
        return out + _migration_bytes(op)
    out += enc_str(op["concept_id"])
    if kind == "set_generated":
        g = op["generated"]
        return out + enc_str(g["by"]) + enc_str(g.get("at") or "")
    if kind in ("ensure_verification", "remove_verification"):
        v = op["verification"]
        return out + enc_str(v["by"]) + enc_str(v["at"])
    if kind == "put_source":
        return out + _source_bytes(op["source"])
    if kind == "remove_source":
        return out + (_selector_bytes(op) or b"")
    if kind == "set_usage_window":
        sel = _selector_bytes(op)
        out += enc_bool(sel is not None) + (sel or b"")
        window = op.get("usage_window")
        out += enc_bool(window is not None)
        if window is not None:
            out += enc_str(window["from"]) + enc_str(window["to"])
        return out
    if kind == "set_lifecycle":
        lc = op["lifecycle"]
        for key in ("status", "stale_after"):
            value = lc.get(key)
            out += enc_bool(value is not None) + (enc_str(value) if value is not None else b"")
        return out
    if kind == "put_attested_computation":
        return out + _contract_bytes(op["attested_computation"])
    raise ValueError(f"unknown operation kind {kind!r}")


def canonical_bytes(cs: ChangeSet) -> bytes:
    out = enc_str("okf:changeset") + u64(cs.version) + enc_str(cs.id) + enc_str(cs.actor)
    out += enc_str(cs.base_revision) + u64(len(cs.operations))
    out += b"".join(operation_bytes(op) for op in cs.operations)
    return out + u64(0)  # MCP change sets never carry preconditions


def request_digest(cs: ChangeSet) -> str:
    return digest_string(canonical_bytes(cs))


def patch_changeset_id(actor: str, operations: tuple[Operation, ...]) -> str:
    """``mcp-patch-`` + the hex of the sentinel change set's digest (revision-independent)."""
    sentinel = ChangeSet(PATCH_ID_SENTINEL, actor, ZERO_REVISION, operations)
    return "mcp-patch-" + request_digest(sentinel)[len("sha256:"):]

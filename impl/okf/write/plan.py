"""A planned mutation and everything derived from it: plan digest, idempotency key, diff.

The plan digest (``okf:mutation-plan:v1``, spec/okf/contract/write.md §2.3) binds a request digest to the
captured base revision and the exact post-state (per-file content digests), so an apply can
prove it would publish precisely what the preview showed. Diagnostics and prose are not
hashed on purpose.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from knowspec.impl.okf.write.encoding import enc_str, enc_strs, sha256_hex, u64

NULLDEV = "/" + "dev" + "/" + "null"
MAX_DIFF_BYTES = 1 << 20
MAX_AFFECTED_PATHS = 10_000


def _bkey(s: str) -> bytes:
    return s.encode("utf-8")


@dataclass(frozen=True)
class Plan:
    """Pure description of a mutation against one captured snapshot."""

    request_digest: str
    base_revision: str
    result_revision: str
    reads: tuple[str, ...]
    writes: dict[str, bytes]          # path -> new bytes
    old: dict[str, bytes | None]      # path -> previous bytes (None: new file)
    deletes: tuple[str, ...] = ()
    affected_refs: tuple[str, ...] = ()
    reverse_impact: tuple[str, ...] = ()
    diagnostics: tuple[dict, ...] = field(default=())

    @property
    def is_noop(self) -> bool:
        return self.result_revision == self.base_revision or not (self.writes or self.deletes)

    def affected_paths(self) -> list[str]:
        return sorted(set(self.writes) | set(self.deletes), key=_bkey)


def plan_digest(plan: Plan) -> str:
    h = hashlib.sha256()
    h.update(enc_str("okf:mutation-plan:v1") + enc_str(plan.request_digest))
    h.update(enc_str(plan.base_revision) + enc_str(plan.result_revision))
    h.update(enc_strs("reads", sorted(set(plan.reads), key=_bkey)))
    writes = sorted(((p, sha256_hex(b)) for p, b in plan.writes.items()), key=lambda w: (_bkey(w[0]), w[1]))
    h.update(enc_str("writes") + u64(len(writes)))
    for path, hexd in writes:
        h.update(enc_str(path) + enc_str(hexd))
    h.update(enc_strs("deletes", sorted(plan.deletes, key=_bkey)))
    h.update(enc_str("renames") + u64(0))
    h.update(enc_strs("affected_refs", sorted(plan.affected_refs, key=_bkey)))
    h.update(enc_strs("reverse_impact", sorted(plan.reverse_impact, key=_bkey)))
    return "sha256:" + h.hexdigest()


def plan_idempotency_key(namespace: str, digest: str, caller_key: str = "") -> str:
    body = enc_str("okf:plan-idempotency:v1") + enc_str(namespace) + enc_str(digest) + enc_str(caller_key)
    return "okf-plan-v1-" + sha256_hex(body)


def _prefixed_lines(text: str, prefix: str) -> list[str]:
    if text == "":
        return []
    lines = text.split("\n")
    out = [prefix + line for line in lines[:-1]]
    if lines[-1] != "":
        out.append(prefix + lines[-1])
        out.append("\\ No newline at end of file")
    return out


def render_diff(plan: Plan) -> str:
    """Whole-file diff: every old line ``-``, every new line ``+`` (not hunk based)."""
    out: list[str] = []
    for path in sorted(plan.writes, key=_bkey):
        before = plan.old.get(path)
        out.append(f"--- a/{path}" if before is not None else f"--- {NULLDEV}")
        out.append(f"+++ b/{path}")
        if before is not None:
            out += _prefixed_lines(before.decode("utf-8", "replace"), "-")
        out += _prefixed_lines(plan.writes[path].decode("utf-8", "replace"), "+")
    for path in sorted(plan.deletes, key=_bkey):
        out.append(f"--- a/{path}")
        out.append(f"+++ {NULLDEV}")
        out += _prefixed_lines((plan.old.get(path) or b"").decode("utf-8", "replace"), "-")
    return "\n".join(out) + ("\n" if out else "")

"""Digest recipes: bundle revision, change-set bytes, plan digest, idempotency key, diff."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.write.changeset import ChangeSet, canonical_bytes, patch_changeset_id, request_digest
from knowspec.impl.okf.write.plan import NULLDEV, Plan, plan_digest, plan_idempotency_key, render_diff
from knowspec.impl.okf.write.revision import revision_of

paths = st.text(alphabet="abcxyz/é._-", min_size=1, max_size=12).filter(
    lambda p: all(seg not in ("", ".", "..") for seg in p.split("/")))
bundles = st.dictionaries(paths, st.binary(max_size=40), max_size=8)


def _restated_revision(files: dict[str, bytes]) -> str:
    """The recipe written out by hand: u64-length-prefixed path and raw 32-byte digest."""
    out = b""
    for path in sorted(files, key=lambda p: p.encode()):
        enc = path.encode()
        digest = hashlib.sha256(files[path]).digest()
        out += len(enc).to_bytes(8, "big") + enc + (32).to_bytes(8, "big") + digest
    return "sha256:" + hashlib.sha256(out).hexdigest()


@given(bundles)
def test_revision_follows_the_length_prefixed_recipe(files):
    assert revision_of(files) == _restated_revision(files)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", revision_of(files))


@given(bundles, st.data())
def test_revision_moves_when_any_file_changes(files, data):
    if not files:
        return
    path = data.draw(st.sampled_from(sorted(files)))
    changed = dict(files)
    changed[path] = files[path] + b"!"
    assert revision_of(changed) != revision_of(files)
    reordered = dict(reversed(list(files.items())))
    assert revision_of(reordered) == revision_of(files)


OP = {"kind": "set_lifecycle", "concept_id": "a", "lifecycle": {"status": "stable", "stale_after": None}}


def test_changeset_bytes_start_with_the_framed_domain_and_version():
    cs = ChangeSet("id", "human:x", "sha256:" + "1" * 64, (OP,))
    raw = canonical_bytes(cs)
    assert raw.startswith((13).to_bytes(8, "big") + b"okf:changeset" + (1).to_bytes(8, "big"))
    assert raw.endswith((0).to_bytes(8, "big"))  # no preconditions


@settings(max_examples=50)
@given(st.sampled_from(["draft", "stable", "deprecated", None]), st.sampled_from(["2026-01-01", None]))
def test_request_digest_binds_every_field(status, stale):
    op = {"kind": "set_lifecycle", "concept_id": "a", "lifecycle": {"status": status, "stale_after": stale}}
    base = ChangeSet("id", "human:x", "sha256:" + "1" * 64, (op,))
    variants = [
        ChangeSet("id2", base.actor, base.base_revision, base.operations),
        ChangeSet(base.id, "human:y", base.base_revision, base.operations),
        ChangeSet(base.id, base.actor, "sha256:" + "2" * 64, base.operations),
        ChangeSet(base.id, base.actor, base.base_revision, (op, op)),
    ]
    digests = {request_digest(base)} | {request_digest(v) for v in variants}
    assert len(digests) == 5


def test_minted_patch_id_ignores_the_base_revision_but_not_the_operations():
    a = patch_changeset_id("human:x", (OP,))
    assert a.startswith("mcp-patch-") and len(a) == len("mcp-patch-") + 64
    other = dict(OP, lifecycle={"status": "draft", "stale_after": None})
    assert patch_changeset_id("human:x", (other,)) != a


def _plan(writes, diagnostics=()):
    return Plan("sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64, ("x.md",), writes,
                {p: b"old\n" for p in writes}, diagnostics=diagnostics)


def test_plan_digest_binds_content_not_diagnostics():
    base = plan_digest(_plan({"x.md": b"new\n"}))
    assert plan_digest(_plan({"x.md": b"new!\n"})) != base
    assert plan_digest(_plan({"x.md": b"new\n"}, diagnostics=({"message": "m"},))) == base


def test_idempotency_key_shape_and_namespace_binding():
    d = "sha256:" + "d" * 64
    key = plan_idempotency_key("mcp:concept-patch", d)
    assert re.fullmatch(r"okf-plan-v1-[0-9a-f]{64}", key)
    assert key != plan_idempotency_key("temporal-upgrade:v1", d)
    assert key == plan_idempotency_key("mcp:concept-patch", d)


def test_diff_is_whole_file_with_new_file_and_missing_newline_markers():
    plan = Plan("sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64, (), {"n.md": b"a\nb", "x.md": b"y\n"},
                {"n.md": None, "x.md": b"x\n"})
    assert render_diff(plan) == (
        f"--- {NULLDEV}\n+++ b/n.md\n+a\n+b\n\\ No newline at end of file\n"
        "--- a/x.md\n+++ b/x.md\n-x\n+y\n"
    )

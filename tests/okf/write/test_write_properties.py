"""Rules stated as properties: affected paths are exactly the changed files, sorted byte-wise
and unique; the applied bundle's revision is the previewed result revision."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.okf.write.revision import revision_of
from write_helpers import make_bundle, preview, apply, visible_bytes

NAMES = ["a", "B", "z/é", "z/a", "m-1", "Z"]
OPS = st.sampled_from([
    lambda c: {"kind": "set_lifecycle", "concept_id": c, "lifecycle": {"status": "stable", "stale_after": None}},
    lambda c: {"kind": "set_generated", "concept_id": c, "generated": {"by": "process:p"}},
    lambda c: {"kind": "put_source", "concept_id": c, "source": {"id": "s", "resource": "https://s"}},
    lambda c: {"kind": "set_lifecycle", "concept_id": c, "lifecycle": {"status": "draft", "stale_after": None}},
])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(NAMES), OPS), min_size=1, max_size=6))
def test_affected_paths_are_the_changed_files_and_the_result_revision_is_real(edits):
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # fsync latency is not under test here
    root = Path(tempfile.mkdtemp(prefix="knowspec-prop-", dir=shm))
    try:
        bundle = make_bundle(root / "b", {f"{n}.md": "---\ntype: Note\nstatus: draft\n---\n" for n in NAMES})
        ops = [make(name) for name, make in edits]
        before = visible_bytes(bundle)
        p = preview(bundle, ops)
        paths = p["affected_paths"]
        assert paths == sorted(set(paths), key=lambda s: s.encode("utf-8"))
        a = apply(bundle, ops, p["base_revision"], p["plan_digest"])
        after = visible_bytes(bundle)
        changed = sorted((k for k in after if after[k] != before.get(k)), key=lambda s: s.encode("utf-8"))
        assert changed == paths == a["changed_paths"]
        assert revision_of(after) == p["result_revision"] == a["result_revision"]
        assert (p["status"] == "noop") == (not paths)
    finally:
        shutil.rmtree(root, ignore_errors=True)

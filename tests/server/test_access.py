"""The OKF access rules over HTTP (impl/server/access.py), without a server."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.generated.registry import TOOLS
from knowspec.impl.context import Caller
from knowspec.impl.server.access import NO_ROOTS, OUTSIDE_ROOTS, inside_roots, okf_refusal

ENTRIES = {t.name: t for t in TOOLS}
ROOTS = (Path("/srv/kb"),)
READER = Caller(user="rita", roles=("Muhasebe",), unrestricted=False)
WRITER = Caller(user="walt", roles=("writer",), unrestricted=False)
ADMIN = Caller(user="sam", roles=("SYSADMIN",), unrestricted=False)
ANONYMOUS = Caller(user="", roles=(), unrestricted=False)
WRITES = [t.name for t in TOOLS if t.family == "okf" and not t.read_only]


@pytest.mark.parametrize(("path", "inside"), [
    ("/srv/kb", True), ("/srv/kb/", True), ("/srv/kb/team/a", True), ("/srv/kbx", False),
    ("/srv/kb/../etc", False), ("/srv", False), ("/", False), ("/etc/passwd", False),
])
def test_inside_roots_is_decided_on_the_cleaned_text(path, inside):
    assert inside_roots(path, ROOTS) is inside


def test_the_write_tools_are_the_four_applies_and_write_concept():
    assert sorted(WRITES) == ["apply_concept_patch", "apply_temporal_upgrade", "apply_v02_migration",
                              "write_concept"]


@pytest.mark.parametrize("tool", WRITES)
@pytest.mark.parametrize("caller", [READER, ANONYMOUS], ids=["reader", "anonymous"])
def test_only_write_roles_may_call_write_tools(tool, caller):
    assert okf_refusal(ENTRIES[tool], "/srv/kb", caller, ROOTS).code == "forbidden"
    assert okf_refusal(ENTRIES[tool], "/srv/kb", WRITER, ROOTS) is None
    assert okf_refusal(ENTRIES[tool], "/srv/kb", ADMIN, ROOTS) is None


@given(st.text(alphabet="abc./", max_size=30))
def test_outside_answers_never_depend_on_the_path(tail):
    path = "/other/" + tail
    refusal = okf_refusal(ENTRIES["read_concept"], path, READER, ROOTS)
    if inside_roots(path, ROOTS):
        assert refusal is None
    else:
        assert (refusal.code, refusal.message) == ("invalid_request", OUTSIDE_ROOTS)


def test_without_roots_okf_tools_refuse_but_stdio_and_doc_tools_pass():
    assert okf_refusal(ENTRIES["list_concepts"], "/srv/kb", READER, ()).message == NO_ROOTS
    assert okf_refusal(ENTRIES["write_concept"], "/anywhere", Caller(), ()) is None  # stdio
    assert okf_refusal(ENTRIES["doc_search"], None, ANONYMOUS, ()) is None


def test_relative_paths_are_left_to_the_bundle_path_rules():
    assert okf_refusal(ENTRIES["list_concepts"], "relative/kb", READER, ROOTS) is None

"""Argument decoding beyond the schema: profiles, windows, payload exclusivity, pydantic input."""

from __future__ import annotations

import pytest

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write.inputs import decode_patch, valid_actor
from write_helpers import patch_args


def _decode(ops, profile="date-3fcbb9f"):
    args = patch_args("/x", ops, unchecked=True, temporal_profile=profile)
    return decode_patch(args)


def _code(ops, profile="date-3fcbb9f"):
    with pytest.raises(ToolError) as err:
        _decode(ops, profile)
    return err.value.code


def _window(frm, to, sid=None):
    op = {"kind": "set_usage_window", "concept_id": "a", "usage_window": {"from": frm, "to": to}}
    if sid:
        op["source_id"] = sid
    return op


def test_date_profile_requires_calendar_dates_and_ordered_windows():
    assert _decode([_window("2026-01-01", "2026-01-01")])
    assert _code([_window("2026-01-02", "2026-01-01")]) == "invalid_request"
    assert _code([_window("2026-1-1", "2026-01-01")]) == "invalid_request"
    assert _code([_window("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")]) == "invalid_request"


def test_instant_profile_requires_offsets_and_compares_instants():
    ok = _window("2026-01-01T10:00:00+02:00", "2026-01-01T09:00:00Z")
    assert _decode([ok], "instant-0b87c52")
    assert _code([_window("2026-01-01T10:00:00Z", "2026-01-01T09:00:00Z")], "instant-0b87c52") == "invalid_request"
    assert _code([_window("2026-01-01", "2026-01-02")], "instant-0b87c52") == "invalid_request"
    assert _code([_window("2026-01-01T00:00:00-00:00", "2026-01-02T00:00:00Z")], "instant-0b87c52") == "invalid_request"


@pytest.mark.parametrize("op", [
    {"kind": "set_lifecycle", "concept_id": "a", "lifecycle": {"status": "x", "stale_after": None}},
    {"kind": "set_bundle_version", "concept_id": "a", "version": "0.2"},
    {"kind": "set_bundle_version", "version": "0.3"},
    {"kind": "put_source", "concept_id": "a", "source": {"resource": "r"}, "source_id": "x"},
    {"kind": "remove_source", "concept_id": "a"},
    {"kind": "remove_source", "concept_id": "a", "source": {"id": "x", "resource": "r"}},
    {"kind": "put_source", "concept_id": "a", "source": {"resource": "r", "usage_count": "01"}},
    {"kind": "set_generated", "concept_id": "a", "generated": {"by": "team:x"}},
    {"kind": "ensure_verification", "concept_id": "a", "verification": {"by": "human:x", "at": "yesterday"}},
    {"kind": "unknown_kind", "concept_id": "a"},
])
def test_malformed_operations_are_invalid_request(op):
    assert _code([op]) == "invalid_request"


@pytest.mark.parametrize("actor,ok", [("human:ana", True), ("process:ci", True), ("tool/1.2", True),
                                      ("team:x", False), ("a/b/c", False), ("human: ", False), (" human:x", False)])
def test_actor_grammar(actor, ok):
    assert valid_actor(actor) is ok


def test_the_generated_input_model_decodes_to_the_operations_sent():
    sent = {"kind": "set_lifecycle", "concept_id": "a", "lifecycle": {"status": "stable", "stale_after": None}}
    decoded = decode_patch(patch_args("/x", [sent], actor="human:a"))
    assert decoded.operations == (sent,) and decoded.profile == "date-3fcbb9f"

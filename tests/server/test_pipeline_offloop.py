"""No part of a call (validation, handler, serialisation) runs on the event loop (issue #19.1)."""

from __future__ import annotations

import threading

import anyio
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from knowspec.generated.registry import TOOLS
from knowspec.impl.context import ToolOutput
from knowspec.impl.server import validation
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.server.validation import SchemaCheck, input_error


def _threads_seen(monkeypatch, registry, handlers, name, arguments) -> tuple[threading.Thread, set[str]]:
    seen: set[str] = set()
    original_errors = SchemaCheck.errors

    def spying_errors(self, instance):
        seen.add(threading.current_thread().name)
        return original_errors(self, instance)

    monkeypatch.setattr(SchemaCheck, "errors", spying_errors)
    runtime = ToolRuntime(entries=registry.TOOLS, handlers=handlers)

    async def go():
        return threading.current_thread(), await runtime.call(name, arguments)

    loop_thread, _ = anyio.run(go)
    return loop_thread, seen


def test_input_validation_of_a_bad_call_runs_off_the_event_loop(monkeypatch, mini_registry):
    loop_thread, seen = _threads_seen(monkeypatch, mini_registry, {}, "echo_text", {"text": 5})
    assert seen and loop_thread.name not in seen


def test_output_validation_runs_off_the_event_loop(monkeypatch, mini_registry):
    handlers = {"echo_text": lambda args, ctx: ToolOutput({"text": args.text, "items": []})}
    loop_thread, seen = _threads_seen(monkeypatch, mini_registry, handlers, "echo_text", {"text": "a"})
    assert len(seen) == 1 and loop_thread.name not in seen  # input and output checks, one worker


def _mixed_kinds(n: int) -> dict:
    return {"bundle_path": "/x", "concept_id": "a", "kinds": [i if i % 2 == 0 else str(i) for i in range(n)]}


def test_diagnostic_pass_on_a_huge_mixed_type_unique_array_is_bounded():
    check = SchemaCheck(next(t for t in TOOLS if t.name == "get_neighbors").input_schema)
    errors = check.errors(_mixed_kinds(12_000))
    assert 0 < len(errors) <= 1024
    assert input_error(errors).code == "resource_limit"  # maxItems is still seen under the cap


def test_unique_items_is_checked_without_pairwise_comparison(monkeypatch):
    """The library's uniqueItems compares pairs (quadratic on mixed types); ours hashes once."""
    import jsonschema._utils as utils

    def forbidden(*_args, **_kwargs):
        raise AssertionError("pairwise equality used for uniqueItems")

    monkeypatch.setattr(utils, "equal", forbidden)
    check = SchemaCheck({"type": "array", "uniqueItems": True, "maxItems": 3})
    assert check.errors([0, "1", 2, "3", 0])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 1.5]) | st.sampled_from(["", "a", "1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=8,
)


@given(st.lists(json_values, max_size=6))
def test_linear_unique_items_agrees_with_the_reference_validator(items):
    reference = Draft202012Validator({"uniqueItems": True}).is_valid(items)
    ours = validation.detail_validator_class()({"uniqueItems": True}).is_valid(items)
    assert ours == reference

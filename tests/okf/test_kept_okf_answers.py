"""list_concepts, get_semantic_graph and validate_bundle answer a repeated call from the answer
kept for the snapshot's revision (``impl/kept_answers.py``; issue #18 goal 4: big answers cheap)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from knowspec.impl import runtime as process
from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext
from knowspec.impl.kept_answers import KeptOutput
from knowspec.impl.okf.graph import render
from knowspec.impl.okf.graph.nodes import Node
from knowspec.impl.okf.tools import read
from knowspec.impl.okf.tools.read import list_concepts
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.server.tool_results import EncodedToolResult
from tool_args import tool_args

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "okf-sample"


@pytest.fixture
def bundle(tmp_path) -> Path:
    copy = tmp_path / "kb"
    shutil.copytree(SAMPLE, copy)
    return copy


@pytest.fixture
def tools(tmp_path):
    with process.activated() as runtime:
        yield ToolRuntime(Settings(appdir=tmp_path / "app"), process_runtime=runtime)


def call(tools: ToolRuntime, name: str, **arguments):
    result = anyio.run(tools.call, name, arguments)
    assert not result.is_error, result.structured_content
    return result.structured_content, result.content[0].text


def counting(monkeypatch, owner, name: str, when=lambda *args, **kwargs: True) -> list[int]:
    """Calls of ``owner.name`` (those ``when`` picks) while the test runs."""
    calls: list[int] = []
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        if when(*args, **kwargs):
            calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_repeated_list_concepts_builds_no_card(tools, bundle, monkeypatch):
    first = call(tools, "list_concepts", bundle_path=str(bundle))
    cards = counting(monkeypatch, read, "concept_card")
    assert call(tools, "list_concepts", bundle_path=str(bundle)) == first
    assert cards == []


def test_a_title_past_the_bmp_is_answered_alike_first_and_from_the_kept_answer(tools, bundle):
    (bundle / "launch.md").write_text('---\ntype: Note\ntitle: "Launch \U0001F680 plan"\n---\nbody\n', encoding="utf-8")
    first = call(tools, "list_concepts", bundle_path=str(bundle))
    assert "Launch \U0001F680 plan" in first[1]
    assert call(tools, "list_concepts", bundle_path=str(bundle)) == first


def test_a_changed_bundle_is_answered_anew(tools, bundle):
    before, _ = call(tools, "list_concepts", bundle_path=str(bundle))
    path = bundle / "glossary.md"
    path.write_text(path.read_text(encoding="utf-8").replace("title:", "title: Renamed", 1), encoding="utf-8")
    after, _ = call(tools, "list_concepts", bundle_path=str(bundle))
    titles = {c["id"]: c["title"] for c in after["concepts"]}
    assert titles["glossary"].startswith("Renamed") and after != before


def test_each_temporal_choice_has_its_own_kept_answer(tools, bundle):
    plain, _ = call(tools, "list_concepts", bundle_path=str(bundle))
    dated, _ = call(tools, "list_concepts", bundle_path=str(bundle), as_of="2026-01-01")
    assert plain["as_of"] is None and dated["as_of"] == "2026-01-01"
    assert call(tools, "list_concepts", bundle_path=str(bundle), as_of="2026-01-01")[0] == dated


def test_a_repeated_graph_renders_nothing_again(tools, bundle, monkeypatch):
    first = call(tools, "get_semantic_graph", bundle_path=str(bundle))
    legacy = counting(monkeypatch, render, "legacy_utf8")
    projected = counting(monkeypatch, render, "project_nodes")
    assert call(tools, "get_semantic_graph", bundle_path=str(bundle)) == first
    assert legacy == [] and projected == []


def test_each_temporal_choice_has_its_own_graph_with_the_same_legacy_text(tools, bundle):
    plain, plain_text = call(tools, "get_semantic_graph", bundle_path=str(bundle))
    dated, dated_text = call(tools, "get_semantic_graph", bundle_path=str(bundle), as_of="2026-01-01")
    assert dated_text == plain_text and dated != plain


def test_the_first_graph_answer_goes_out_as_its_json_never_as_values(tools, bundle, monkeypatch):
    # json.loads is the process's: count only decodes of a graph, not another thread's JSON.
    loads = counting(monkeypatch, render.json, "loads", lambda text, *a, **k: "@graph" in str(text[:4096]))
    result = anyio.run(lambda: tools.call("get_semantic_graph", {"bundle_path": str(bundle)}, None, lambda r: r,
                                          takes_json=True))
    assert isinstance(result, EncodedToolResult) and result.kept is not None, result
    assert result.structured_content == {} and loads == []  # the values are left as JSON until a reader needs them
    assert json.loads(result.kept.structured_json())["@graph"]


def test_each_graph_node_meets_the_tools_output_schema(tools, bundle, monkeypatch):
    real = Node.jsonld
    monkeypatch.setattr(Node, "jsonld", lambda node: {**real(node), "projectionVersion": 2})
    result = anyio.run(tools.call, "get_semantic_graph", {"bundle_path": str(bundle)})
    assert result.is_error and result.structured_content["code"] == "schema_validation", result.structured_content


def test_a_repeated_validation_checks_nothing_again_and_each_check_set_has_its_own_answer(tools, bundle, monkeypatch):
    from knowspec.impl.okf.validation import diagnostics

    plain = call(tools, "validate_bundle", bundle_path=str(bundle))
    strict = call(tools, "validate_bundle", bundle_path=str(bundle), strict=True, check_links=True)
    validations = counting(monkeypatch, diagnostics, "validate_snapshot")
    assert call(tools, "validate_bundle", bundle_path=str(bundle)) == plain
    assert call(tools, "validate_bundle", bundle_path=str(bundle), strict=True, check_links=True) == strict
    assert validations == []
    assert call(tools, "validate_bundle", bundle_path=str(bundle), check_orphans=True)[0]["scanned_files"]
    assert validations == [1]  # another set of checks: validated anew


def test_a_handler_called_directly_gives_the_kept_values(tools, bundle):
    structured, text = call(tools, "list_concepts", bundle_path=str(bundle))
    output = list_concepts(tool_args("list_concepts", bundle_path=str(bundle)), CallContext(runtime=tools.process))
    assert isinstance(output, KeptOutput)
    assert (output.structured, output.text) == (structured, text)


def test_a_refused_validation_is_refused_again_without_checking_until_the_bundle_changes(tools, bundle, monkeypatch):
    """Over its diagnostics bound, a validation ends in resource_limit after all its work: the
    same checks on the same snapshot revision are refused at once, a changed bundle is checked."""
    from knowspec.impl.okf.validation import diagnostics

    monkeypatch.setattr(read, "MAX_DIAGNOSTICS", -1)  # every report is over it (the sample bundle is clean)
    arguments = {"bundle_path": str(bundle), "strict": True, "check_links": True, "check_orphans": True}
    first = anyio.run(tools.call, "validate_bundle", arguments)
    assert first.is_error and first.structured_content["code"] == "resource_limit"
    validations = counting(monkeypatch, diagnostics, "validate_snapshot")
    again = anyio.run(tools.call, "validate_bundle", arguments)
    assert validations == [] and again.structured_content == first.structured_content
    assert again.content[0].text == first.content[0].text
    anyio.run(tools.call, "validate_bundle", {"bundle_path": str(bundle)})
    assert validations == [1]  # other checks: checked anew
    path = bundle / "glossary.md"
    path.write_text(path.read_text(encoding="utf-8") + "\nMore.\n", encoding="utf-8")
    assert anyio.run(tools.call, "validate_bundle", arguments).is_error and validations == [1, 1]

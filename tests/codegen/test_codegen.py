"""spec → generated: deterministic, self-contained schemas, readable staleness, spec problems."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from knowspec.codegen.build import SpecProblems, produce
from knowspec.codegen.bundle import bundle_schema
from knowspec.codegen.check import diff_summary, existing_files, write_tree
from knowspec.codegen.cli import REPO
from knowspec.impl.cli import main

MINI = Path(__file__).parent / "mini_spec"


@pytest.fixture(scope="module")
def mini_files():
    return produce(MINI)


def test_two_runs_produce_identical_bytes(mini_files):
    assert produce(MINI) == mini_files


def test_no_timestamps_or_absolute_paths_in_output(mini_files):
    for rel, text in mini_files.items():
        assert "/tmp" not in text and str(REPO) not in text, rel
        assert "generated on" not in text.lower(), rel


def test_advertised_output_accepts_success_and_envelope(mini_files):
    schema = json.loads(mini_files["schemas/echo/echo_text.output.json"])
    validator = Draft202012Validator(schema)
    assert schema["type"] == "object"
    validator.validate({"text": "a", "items": [{"text": "a", "kind": "b"}]})
    validator.validate({"code": "resource_limit", "message": "m", "retryable": False, "diagnostics": []})
    assert not validator.is_valid({"text": "a"})


def test_cross_file_refs_are_inlined(mini_files):
    schema = json.loads(mini_files["schemas/echo/echo_text.success.json"])
    text = json.dumps(schema)
    assert "common.schema.json" not in text
    assert set(schema["$defs"]) == {"Item", "Kind"}
    Draft202012Validator(schema).validate({"text": "a", "items": [{"text": "b", "kind": "a"}]})


def test_contract_carries_limits_and_wrap(mini_files):
    contract = json.loads(mini_files["contract.json"])
    tools = {t["name"]: t for t in contract["tools"]}
    assert tools["echo_text"]["limits"]["limit"] == {"default": 10, "minimum": 1, "maximum": 50}
    assert tools["echo_list"]["wrap"] == "results"
    assert "resource_limit" in contract["error_codes"]


def test_models_are_closed_and_named_per_tool(mini_files):
    source = mini_files["models/echo/echo_text_input_schema.py"]
    assert "class EchoTextInput(BaseModel)" in source
    assert 'extra="forbid"' in source


def test_check_reports_a_readable_diff_after_a_schema_edit(tmp_path, mini_files):
    out = tmp_path / "generated"
    write_tree(mini_files, out)
    spec = tmp_path / "spec"
    shutil.copytree(MINI, spec)
    path = spec / "echo" / "schemas" / "echo_text.input.schema.json"
    schema = json.loads(path.read_text())
    schema["properties"]["text"]["minLength"] = 2
    path.write_text(json.dumps(schema))
    code = main(["codegen", "--check", "--spec", str(spec), "--out", str(out)])
    assert code == 1
    lines = diff_summary(produce(spec), existing_files(out))
    assert "stale: generated/schemas/echo/echo_text.input.json" in lines
    assert any('"minLength": 2' in line for line in lines)


def test_check_passes_on_fresh_output(tmp_path, mini_files):
    out = tmp_path / "generated"
    write_tree(mini_files, out)
    assert main(["codegen", "--check", "--spec", str(MINI), "--out", str(out)]) == 0
    assert main(["codegen", "--spec", str(MINI), "--out", str(out)]) == 0
    written = existing_files(out)
    assert written.pop("CHANGES.md").startswith("# Contract changes")  # the revision log codegen keeps
    assert written == mini_files


def _broken_copy(tmp_path, edit) -> Path:
    spec = tmp_path / "spec"
    shutil.copytree(MINI, spec)
    table = spec / "echo" / "tools.toml"
    table.write_text(edit(table.read_text()))
    return spec


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda t: t.replace("maximum = 50", "maximum = 49"), "table says 49"),
        (lambda t: t.replace('"schema_validation", "resource_limit"', '"made_up_code"'), "not in spec/errors.toml"),
        (lambda t: t.replace("echo_text.output.schema.json", "missing.json"), "schema file is missing"),
        (lambda t: t.replace('impl = "knowspec.impl.testing_echo:echo_text"', 'impl = "os:system"'), "is not knowspec.impl"),
        (lambda t: t.replace('wrap = "results"', 'wrap = "nope"'), "wrap property"),
        (lambda t: t.replace("[tool.limits]", "[tool.limit]"), "tool/0 (echo_text): unknown key(s) limit"),
        (lambda t: t.replace("order = 1", "order = 1\nencoder = 'go'"), "family: unknown key(s) encoder"),
        (lambda t: t.replace("read_only = true", "readonly_hint = true\nread_only = true", 1), "unknown key(s) readonly_hint"),
        (lambda t: t + "\n[extra]\nx = 1\n", "unknown key(s) extra"),
        (lambda t: t.replace("order = 1", "order = = 1"), "echo/tools.toml: invalid TOML"),
    ],
)
def test_spec_problems_are_reported_with_their_place(tmp_path, edit, needle):
    spec = _broken_copy(tmp_path, edit)
    with pytest.raises(SpecProblems) as info:
        produce(spec)
    assert needle in str(info.value)
    assert "echo/tools.toml" in str(info.value) or "echo/schemas" in str(info.value)


def test_a_toml_error_is_not_followed_by_problems_it_caused(tmp_path):
    spec = _broken_copy(tmp_path, lambda t: t.replace("order = 1", "order = = 1"))
    with pytest.raises(SpecProblems) as info:
        produce(spec)
    assert [p.message.split(":")[0] for p in info.value.problems] == ["invalid TOML"]


@pytest.mark.parametrize("value", ['"one"', "0", "1.5", "true"])
def test_a_contract_revision_that_is_not_a_whole_number_is_a_spec_problem(tmp_path, value):
    spec = _broken_copy(tmp_path, lambda t: t)
    (spec / "REVISION.toml").write_text(f"contract-revision = {value}\n")
    with pytest.raises(SpecProblems, match="REVISION.toml#contract-revision: must be a whole number"):
        produce(spec)


def test_codegen_names_a_tool_whose_impl_is_not_written(tmp_path, capsys):
    import argparse

    from knowspec.codegen.cli import run

    spec = _broken_copy(tmp_path, lambda t: t.replace("testing_echo:echo_text", "okf.tools.read:list_concepts")
                        .replace("testing_echo:echo_list", "okf.tools.read:echo_later"))
    assert run(argparse.Namespace(spec=spec, out=tmp_path / "out", check=False)) == 0
    err = capsys.readouterr().err
    assert "note: echo_list: knowspec.impl.okf.tools.read:echo_later is not written yet" in err
    assert "echo_text" not in err


def test_bundle_rejects_refs_it_cannot_inline(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"type": "object", "properties": {"x": {"$ref": "b.json#/properties/y"}}}))
    (tmp_path / "b.json").write_text(json.dumps({"properties": {"y": {"type": "string"}}}))
    with pytest.raises(ValueError):
        bundle_schema(tmp_path / "a.json")


def test_repository_generated_tree_is_fresh():
    """The same gate as CI's `knowspec codegen --check`, on the real spec/."""
    lines = diff_summary(produce(REPO / "spec"), existing_files(REPO / "generated"))
    assert not lines, "\n".join(lines[:40])

"""`knowspec spec diff` on real spec folders and git revisions: exit codes and what it names."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from knowspec.impl.cli import main

SPEC = Path(__file__).resolve().parents[2] / "spec"
SCHEMA = "okf/schemas/search_concepts.input.schema.json"


@pytest.fixture()
def specs(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(SPEC, old, symlinks=False)
    shutil.copytree(SPEC, new, symlinks=False)
    return old, new


def set_limit_maximum(spec: Path, value: int) -> None:
    path = spec / SCHEMA
    schema = json.loads(path.read_text())
    schema["properties"]["limit"]["maximum"] = value
    path.write_text(json.dumps(schema, indent=2))
    table = spec / "okf" / "tools.toml"  # the tool table restates the limit; codegen checks they agree
    head, _, rest = table.read_text().partition('name = "search_concepts"')
    rest = rest.replace("limit = { default = 20, minimum = 1, maximum = 100 }",
                        f"limit = {{ default = 20, minimum = 1, maximum = {value} }}", 1)
    table.write_text(head + 'name = "search_concepts"' + rest)


def run(capsys, *args):
    code = main(["spec", "diff", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_identical_specs_exit_zero(capsys, specs):
    code, out, _ = run(capsys, *specs)
    assert code == 0 and "no changes" in out


def test_a_widened_input_maximum_breaks_implementations_and_names_the_tool(capsys, specs):
    """A server built for 100 refuses 500, so it fails the new contract's conformance: the diff had
    called this compatible (exit 0)."""
    old, new = specs
    set_limit_maximum(new, 500)
    code, out, _ = run(capsys, old, new)
    assert code == 1
    assert "tool search_concepts" in out
    assert "[BREAKING for implementations] input.bound_widened input.limit.maximum: 100 -> 500" in out


def test_a_narrowed_input_maximum_breaks_and_names_the_tool_and_field(capsys, specs):
    old, new = specs
    set_limit_maximum(new, 50)
    code, out, _ = run(capsys, old, new, "--json")
    assert code == 1
    report = json.loads(out)
    assert {(c["subject"], c["where"], c["class"]) for c in report["changes"]} == {
        ("search_concepts", "input.limit.maximum", "breaking")}


def test_markdown_for_a_pull_request(capsys, specs):
    old, new = specs
    set_limit_maximum(new, 50)
    code, out, _ = run(capsys, old, new, "--format", "markdown")
    assert code == 1 and out.startswith("### Contract diff") and "| `tool search_concepts` | BREAKING for clients |" in out


@pytest.mark.parametrize("side", ["/nonexistent/spec", "git:no-such-revision"])
def test_bad_input_exits_two_with_one_line(capsys, specs, side):
    code, out, err = run(capsys, side, specs[1])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_a_git_revision_reads_that_revision_of_the_spec(capsys, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(SPEC, repo / "spec", symlinks=False)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    set_limit_maximum(repo / "spec", 50)
    monkeypatch.chdir(repo)  # git:REV is a revision of the repository holding the current folder
    code, out, _ = run(capsys, "git:HEAD", "spec")
    assert code == 1 and "input.bound_narrowed input.limit.maximum: 100 -> 50" in out

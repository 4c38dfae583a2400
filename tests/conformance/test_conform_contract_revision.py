"""--contract git:REV: the suite judges a target against the contract a revision generated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import ContractError, load_contract, parse_contract
from knowspec.conformance.drift import contract_drift
from knowspec.conformance.events import CheckFinished
from knowspec.conformance.oracles.go_encoding import go_marshal
from knowspec.conformance.oracles.plain_encoding import plain_problem
from knowspec.conformance.reporters.console import drift_lines
from knowspec.conformance.runner import EXIT_FAILURES, EXIT_OK, run_to_end

CONTRACT = Path(__file__).resolve().parents[2] / "generated" / "contract.json"


def test_a_git_revision_gives_that_revisions_contract_and_names_it(tmp_path, monkeypatch):
    data = json.loads(CONTRACT.read_text())
    data["revision"]["contract-revision"] = 7
    data["tools"] = data["tools"][:3]
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "contract.json").write_text(json.dumps(data))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "r7"], check=True)
    (tmp_path / "generated" / "contract.json").write_text("{}")  # the work tree is not what is read
    monkeypatch.chdir(tmp_path)
    contract = load_contract("git:HEAD")
    assert [t.name for t in contract.tools] == [t["name"] for t in data["tools"]]
    assert contract.source == "git:HEAD:generated/contract.json (contract revision 7)"


def test_an_unknown_revision_is_a_contract_error(tmp_path, monkeypatch):
    subprocess.run(["git", "-C", str(tmp_path), "init", "-q"], check=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ContractError, match="git:nope"):
        load_contract("git:nope")


# ---- text encoders: a contract is judged by the encoder it names (plain when it names none) ----

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _plain(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(json_values)
def test_plain_accepts_compact_json_that_escapes_only_what_json_requires(value):
    assert plain_problem(_plain(value)) is None


@given(json_values)
def test_go_bytes_are_plain_exactly_when_no_string_holds_a_character_go_escapes(value):
    go_escaped = any(ch in "<>&\u2028\u2029" for ch in json.dumps(value, ensure_ascii=False))
    assert (plain_problem(go_marshal(value)) is not None) == go_escaped


def test_plain_refuses_whitespace_ascii_escapes_and_escaped_pairs():
    assert "whitespace" in plain_problem(json.dumps({"a": 1}))
    assert "written as \\u00e9" in plain_problem(json.dumps("é"))
    assert "written as \\ud83d\\ude00" in plain_problem(json.dumps("\U0001F600"))
    assert "'/'" in plain_problem('"a\\/b"')
    assert plain_problem('"\\u0000\\n\\"\\\\\\ud800"') is None   # required escapes and a lone surrogate


def _toy_contract(tmp_path: Path, encoder: str | None) -> Path:
    sys.path.insert(0, str(Path(__file__).parent / "targets"))
    from toy_schemas import contract

    data = contract()
    for tool in data["tools"]:
        tool.pop("text_encoder")
        if encoder:
            tool["text_encoder"] = encoder
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("variant,encoder,fails", [
    ("good", "go", False),          # the toy writes Go's bytes: <, >, & as \u003c ...
    ("good", None, True),           # a contract without text_encoder means plain: Go's escapes break it
    ("plain_text", None, False),
    ("plain_text", "go", True),
])
def test_text_encoding_judges_the_encoder_the_contract_names(variant, encoder, fails, tmp_path, target_for):
    finished = run_to_end(RunConfig(target=target_for(variant), contract_path=_toy_contract(tmp_path, encoder),
                                    max_examples=5, checks=("text_encoding", "text_fallback")))
    failed = {(r.check_id, r.tool) for r in finished.results if r.status == "failed"}
    assert failed == ({("text_encoding", "search_concepts"), ("text_encoding", "get_neighbors")} if fails else set())
    assert finished.exit_code == (EXIT_FAILURES if fails else EXIT_OK)
    for r in finished.results:
        if r.status == "failed":
            assert f"not {encoder or 'plain'} JSON" in r.failure.message


# ---- contract drift: the breaking changes between the judged revision and the suite's ----------

def _finished(check_id: str, tool: str, status: str = "failed") -> CheckFinished:
    return CheckFinished(check_id, "rule", tool, status, 0.0)


def _revisions() -> tuple:
    shipped = json.loads(CONTRACT.read_text())
    old = json.loads(CONTRACT.read_text())
    old["revision"] = {k: v for k, v in old["revision"].items() if k not in ("contract-revision", "history")}
    for tool in old["tools"]:
        tool.pop("text_encoder", None)
    return parse_contract(old, "git:OLD"), parse_contract(shipped, "suite")


def test_drift_lists_each_breaking_change_observed_or_why_not_and_failures_it_does_not_explain():
    old, shipped = _revisions()
    okf = {t.name: t for t in old.tools if t.family == "okf"}
    json_tools = sorted(n for n, t in okf.items() if t.text_fallback == "json")
    results = [_finished("text_encoding", n) for n in json_tools[:-1]]
    results += [_finished("text_encoding", json_tools[-1], "passed"), _finished("truncation", "search_concepts")]
    drift = contract_drift(old.for_family("okf"), shipped.for_family("okf"), results)
    assert {(c["kind"], c["subject"]) for c in drift["breaking"]} == {("tool.text_changed", n) for n in okf}
    by_tool = {c["subject"]: c for c in drift["breaking"]}
    assert sorted(n for n, c in by_tool.items() if c["observed"]) == json_tools[:-1]
    assert by_tool[json_tools[0]]["cases"] == [f"text_encoding[{json_tools[0]}]"]
    assert "no failed case" in by_tool[json_tools[-1]]["why"]
    custom = next(n for n, t in okf.items() if t.text_fallback == "custom")
    assert "text fallback is custom" in by_tool[custom]["why"]
    assert drift["unexplained"] == ["truncation[search_concepts]"]
    lines = drift_lines(drift)
    assert lines[0].startswith(f"CONTRACT DRIFT: git:OLD -> this suite's suite: {len(okf)} breaking change(s), "
                               f"{len(json_tools) - 1} observed")
    assert lines[-1] == "  failures no drift change explains: truncation[search_concepts]"


def test_no_drift_when_the_judged_contract_is_not_older():
    _, shipped = _revisions()
    assert contract_drift(shipped, shipped, [_finished("text_encoding", "search_concepts")]) == {}


@pytest.mark.parametrize("revision,status", [(None, "skipped"), (1, "failed")])
def test_a_check_whose_rule_a_revision_does_not_state_is_skipped_under_it(revision, status, tmp_path, target_for):
    path = _toy_contract(tmp_path, "go")
    data = json.loads(path.read_text())
    data["revision"].pop("contract-revision")
    if revision is not None:
        data["revision"]["contract-revision"] = revision
    path.write_text(json.dumps(data))
    finished = run_to_end(RunConfig(target=target_for("drops_bad_lines"), contract_path=path,
                                    checks=("every_line_answered",)))
    (result,) = finished.results
    assert result.status == status
    if status == "skipped":
        assert "first stated in contract revision 1" in result.reason


@pytest.mark.parametrize("number", ["one", 1.5, -1, True])
def test_a_contract_whose_revision_is_not_a_whole_number_is_refused_with_a_reason(tmp_path, number):
    import json

    from knowspec.conformance.contract import ContractError, load_contract

    data = json.loads((Path(__file__).resolve().parents[2] / "generated" / "contract.json").read_text())
    data.setdefault("revision", {})["contract-revision"] = number
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ContractError, match="is not a whole number"):
        load_contract(path)

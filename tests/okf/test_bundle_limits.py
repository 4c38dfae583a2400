"""Bundle limits an operator raises (`serve --max-bundle-files/--max-bundle-bytes`): the contract's
stay the defaults, raised ones are enforced in their turn, bad values are refused at the command
line. The defaults are shrunk by monkeypatching so that no test writes 10,001 files."""

from __future__ import annotations

import argparse

import pytest

from knowspec.generated.models.okf.search_concepts_input_schema import SearchConceptsInput
from knowspec.impl import cli
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle import snapshot as snap
from knowspec.impl.okf.tools import query, read
from okf_helpers import ctx, list_concepts, write_bundle

CONCEPT = "---\ntype: Note\n---\nbody\n"


def _concepts(n: int) -> dict[str, str]:
    return {f"c{i}.md": CONCEPT for i in range(n)}


def _code(call) -> str:
    with pytest.raises(ToolError) as exc:
        call()
    return exc.value.code


def test_default_file_limit_holds_without_flags(tmp_path, monkeypatch, runtime):
    monkeypatch.setattr(snap, "MAX_FILES", 3)
    kb = write_bundle(tmp_path / "kb", _concepts(4))
    assert _code(lambda: list_concepts(kb)) == "resource_limit"


def test_raised_file_limit_admits_a_larger_bundle_and_is_enforced(tmp_path, monkeypatch, runtime, runtime_settings):
    monkeypatch.setattr(snap, "MAX_FILES", 3)
    runtime_settings(max_bundle_files=5)
    kb = write_bundle(tmp_path / "kb", _concepts(5))
    assert len(list_concepts(kb).structured["concepts"]) == 5
    (kb / "c5.md").write_text(CONCEPT)
    assert _code(lambda: list_concepts(kb)) == "resource_limit"


def test_raised_byte_limit_admits_a_larger_bundle_and_is_enforced(tmp_path, monkeypatch, runtime, runtime_settings):
    monkeypatch.setattr(snap, "MAX_TOTAL_BYTES", 2 * len(CONCEPT))
    kb = write_bundle(tmp_path / "kb", _concepts(3))
    assert _code(lambda: list_concepts(kb)) == "resource_limit"
    runtime_settings(max_bundle_bytes=3 * len(CONCEPT))
    assert len(list_concepts(kb).structured["concepts"]) == 3
    (kb / "c3.md").write_text(CONCEPT)
    assert _code(lambda: list_concepts(kb)) == "resource_limit"


def test_concept_cap_follows_a_raised_file_limit(tmp_path, monkeypatch, runtime, runtime_settings):
    monkeypatch.setattr(read, "MAX_CONCEPTS", 2)
    monkeypatch.setattr(query, "MAX_CONCEPTS", 2)
    kb = write_bundle(tmp_path / "kb", _concepts(3))
    search = lambda: query.search_concepts(SearchConceptsInput(bundle_path=str(kb), query="body"), ctx())  # noqa: E731
    assert _code(lambda: list_concepts(kb)) == "resource_limit"
    assert _code(search) == "resource_limit"
    runtime_settings(max_bundle_files=20_000)
    assert len(list_concepts(kb).structured["concepts"]) == 3
    assert search().structured["total"] == 3


def _serve_args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["serve", "--stdio", *argv])


def test_serve_flags_reach_the_runtime_settings():
    args = _serve_args("--max-bundle-files", "50000", "--max-bundle-bytes", "1_073_741_824")
    settings = cli._runtime_settings(args)
    assert (settings.max_bundle_files, settings.max_bundle_bytes) == (50_000, 1 << 30)


def test_serve_without_flags_keeps_the_contract_limits():
    settings = cli._runtime_settings(_serve_args())
    assert (settings.max_bundle_files, settings.max_bundle_bytes) == (None, None)


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--max-bundle-files", "lots", "expected a whole number of files"),
    ("--max-bundle-files", "9999", "at least the contract's 10000 files"),
    ("--max-bundle-files", "-1", "at least the contract's 10000 files"),
    ("--max-bundle-bytes", "1.5", "expected a whole number of bytes"),
    ("--max-bundle-bytes", "1024", "at least the contract's 67108864 bytes"),
])
def test_serve_refuses_bad_limit_values(flag, value, says, capsys):
    with pytest.raises(SystemExit) as exc:
        _serve_args(flag, value)
    assert exc.value.code == 2
    assert says in capsys.readouterr().err

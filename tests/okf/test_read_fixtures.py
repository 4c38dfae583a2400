"""Table-driven reproduction of the upstream read-side fixtures through ``validate_bundle``.

Each fixture directory with a ``manifest.yaml`` is one test: its ``run`` flags become the tool
arguments and its ``expected.json`` (file, severity, message) and manifest expectations (code,
spec_ref, field_path, policy_failure, message_contains) must be reproduced exactly.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
import yaml

from knowspec.impl.rules.redaction import REDACTED, redact_message
from okf_helpers import copy_tree, validate
from optional_data import UPSTREAM_FIXTURES as FIXTURES, cases

pytestmark = pytest.mark.upstream_fixtures

# Fixtures from before 61e75e9 whose expectation the target revision changed (spec/okf/contract/read.md §7).
SUPERSEDED = {
    "negative/root-index-extra-frontmatter-key": "superseded by positive/root-index-extension: unknown root keys are allowed",
}
# Fixtures whose expected.json predates a newer manifest: only the manifest is checked.
STALE_EXPECTED = {
    "strict/citation-heading-level": "manifest @8e5ef56 supersedes expected.json @dc8f099",
}
# Legacy fixtures (dc8f099 era) were written when an undeclared bundle validated as v0.1.
LEGACY_PREFIXES = ("strict/", "spec-", "forward-compat")
CLI_ONLY_SELECTORS = {"v0.2"}


def _fixture_dirs() -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(FIXTURES):
        if "manifest.yaml" in files:
            out.append(os.path.relpath(dirpath, FIXTURES))
    return sorted(out)


def _run(rel: str, tmp_path):
    manifest = yaml.safe_load((FIXTURES / rel / "manifest.yaml").read_text())
    bundle = copy_tree(FIXTURES / rel, tmp_path / "bundle")
    for name in ("manifest.yaml", "expected.json"):
        (bundle / name).unlink(missing_ok=True)
    if rel == "link/symlink-ignored":
        (bundle / "alias.md").unlink()
        os.symlink("real.md", bundle / "alias.md")
    run = manifest.get("run", {})
    spec = run.get("spec")
    if spec in CLI_ONLY_SELECTORS:
        pytest.skip("selector outside the MCP enum (auto, 0.1, 0.2)")
    target = spec if spec in ("0.1", "0.2") else ("0.1" if rel.startswith(LEGACY_PREFIXES) else "auto")
    out = validate(bundle, strict=run.get("strict", False), check_links=run.get("check_links", False),
                   check_orphans=run.get("check_orphans", False), target_version=target)
    return manifest, out.structured


def _message_matches(needle: str, message: str) -> bool:
    """MCP redacts paths in messages (spec/okf/contract/read.md §4.4); the fixtures record the CLI's unredacted text."""
    redacted = redact_message(needle)
    if redacted == REDACTED:
        return message == REDACTED
    return needle in message or redacted in message


@pytest.mark.parametrize("rel", cases(_fixture_dirs()), ids=lambda r: r)
def test_fixture_reproduces_expected_diagnostics(rel, tmp_path):
    manifest, result = _run(rel, tmp_path)
    if rel in SUPERSEDED:  # the target revision's behaviour: no diagnostic at all
        assert result["diagnostics"] == [], SUPERSEDED[rel]
        return
    got = result["diagnostics"]
    expected_file = FIXTURES / rel / "expected.json"
    if expected_file.exists() and rel not in STALE_EXPECTED:
        expected = json.loads(expected_file.read_text())
        want = Counter(
            (("" if d.get("file", "") == "." else d.get("file", "")), d["severity"], redact_message(d["message"]))
            for d in expected["diagnostics"]
        )
        have = Counter((d["file"], d["severity"], d["message"]) for d in got)
        assert have == want
        assert result["scanned_files"] == expected["scanned_files"]
        policy = any(d["policy_failure"] for d in got)
        assert (1 if result["conformance"]["errors"] or policy else 0) == expected["exit_code"]
    for want in manifest.get("expected", {}).get("diagnostics", []) or []:
        matches = [
            d for d in got
            if d["severity"] == want["severity"]
            and _message_matches(want.get("message_contains", ""), d["message"])
            and d["code"] == want.get("code", d["code"])
            and d["spec_ref"] == want.get("spec_ref", d["spec_ref"])
            and d["field"] == want.get("field_path", d["field"])
            and d["policy_failure"] == want.get("policy_failure", d["policy_failure"])
        ]
        assert matches, f"missing {want} in {got}"
    if manifest.get("expected", {}).get("diagnostics") == []:
        assert got == []

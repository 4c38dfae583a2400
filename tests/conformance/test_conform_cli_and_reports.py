"""Exit codes and report files: 2 for an unreachable target or a bad contract; reports parse."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from knowspec.conformance.cli import main


def test_unreachable_target_exits_2_and_every_report_says_why(toy_contract, tmp_path):
    rc = main(["--target", "stdio:/nonexistent/server-binary", "--contract", str(toy_contract),
               "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"), "--html", str(tmp_path / "r.html"),
               "--text", str(tmp_path / "r.txt")])
    assert rc == 2
    why = json.loads((tmp_path / "r.json").read_text())["unreachable"]
    assert why
    root = ET.parse(tmp_path / "r.xml").getroot()
    errors = root.findall(".//testcase/error")  # CI sees one error, not 0 tests
    assert [e.get("type") for e in errors] == ["unreachable"] and errors[0].get("message") == why[:500]
    assert (root.get("tests"), root.get("errors")) == ("1", "1")
    assert "no check ran" in (tmp_path / "r.html").read_text()
    assert "target unreachable or misconfigured" in (tmp_path / "r.txt").read_text()


def test_missing_contract_exits_2(tmp_path, target_for):
    assert main(["--target", target_for("good"), "--contract", str(tmp_path / "none.json")]) == 2


def test_malformed_target_exits_2(toy_contract):
    assert main(["--target", "ftp://example", "--contract", str(toy_contract)]) == 2


def test_reports_and_baseline(toy_contract, target_for, tmp_path):
    common = ["--target", target_for("flip_truncated"), "--contract", str(toy_contract), "--check", "truncation",
              "--max-examples", "5"]
    reports = ["--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"),
               "--html", str(tmp_path / "r.html"), "--text", str(tmp_path / "r.txt"),
               "--write-baseline", str(tmp_path / "baseline.json")]
    assert main(common + reports) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["by_check"]["truncation"]["failed"] == 1
    failed = [r for r in report["results"] if r["status"] == "failed"][0]
    assert failed["failure"]["arguments"] is not None and failed["failure"]["response"] is not None
    suites = ET.parse(tmp_path / "r.xml").getroot()
    assert suites.find("testsuite").get("failures") == "1"
    cases = suites.findall(".//testcase")  # the run's totals on the root, as CI dashboards read them
    assert (suites.get("tests"), suites.get("failures")) == (str(len(cases)), "1")
    assert "truncation[search_concepts]" in (tmp_path / "r.html").read_text()
    text = (tmp_path / "r.txt").read_text()  # the console's summary, in plain text
    assert "truncation[search_concepts]" in text and "exit 1: failed 1" in text and text.isascii()
    # the written baseline accepts the failure: the same run now exits 0
    assert main(common + ["--baseline", str(tmp_path / "baseline.json")]) == 0


def test_baseline_entries_that_now_pass_are_reported(toy_contract, target_for, tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"accepted": [{"check": "tools_list", "tool": "search_concepts"}]}))
    rc = main(["--target", target_for("good"), "--contract", str(toy_contract), "--check", "tools_list",
               "--baseline", str(baseline), "--json", str(tmp_path / "r.json")])
    assert rc == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["stale_baseline"] == [{"check": "tools_list", "tool": "search_concepts"}]


def test_unknown_check_id_is_a_misconfiguration(toy_contract, target_for):
    assert main(["--target", target_for("good"), "--contract", str(toy_contract), "--check", "no_such_check"]) == 2


def test_an_exhausted_time_budget_skips_the_remaining_cases(toy_contract, target_for):
    from knowspec.conformance.config import RunConfig
    from knowspec.conformance.runner import run_to_end

    finished = run_to_end(RunConfig(target=target_for("good"), contract_path=toy_contract, time_budget=1e-6,
                                    checks=("tools_list", "truncation")))
    assert {r.status for r in finished.results} == {"skipped"}
    assert all("time budget" in r.reason for r in finished.results)


def test_the_json_report_says_where_the_time_went(toy_contract, target_for, tmp_path):
    assert main(["--target", target_for("good"), "--contract", str(toy_contract), "--max-examples", "2",
                 "--workers", "1", "--check", "tools_list", "--check", "input_valid_accepted", "--check", "cancellation",
                 "--json", str(tmp_path / "r.json")]) == 0
    timings = json.loads((tmp_path / "r.json").read_text())["timings"]
    assert set(timings["phases"]) == {"contract_and_plan", "handshake", "pool_fixture", "cases"}
    assert timings["phases"]["handshake"] > 0 and timings["phases"]["cases"] > 0
    row = timings["by_check"]["input_valid_accepted"]
    assert row["building_fixtures"] > 0 and row["seconds"] >= row["building_fixtures"]
    assert timings["cpu_seconds"]["suite"] > 0 and timings["cpu_seconds"]["stdio_servers"] > 0
    # one worker: the first session (tools/list) serves every case, the cancellation check last
    assert timings["sessions_opened"] == 0 and timings["retried_alone"] == []


def test_advertised_only_on_the_command_line_names_the_tools_left_unjudged(toy_contract, target_for, tmp_path):
    report = tmp_path / "report.json"
    rc = main(["--target", target_for("missing_tool"), "--contract", str(toy_contract), "--check", "tools_list",
               "--advertised-only", "--strict", "--json", str(report)])
    assert rc == 0
    areas = json.loads(report.read_text())["skipped_areas"]
    assert [a["area"] for a in areas] == ["tools the target does not offer"]
    assert "get_neighbors" in areas[0]["why"]


def test_a_run_leaves_no_hypothesis_folder_in_the_callers_folder(tmp_path, toy_contract):
    """hypothesis writes .hypothesis/ (a Unicode table, collected constants) into the working
    folder by default: a user's `knowspec conform` had left one wherever they ran it."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from toy_paths import toy_target

    knowspec = shutil.which("knowspec") or str(Path(sys.executable).parent / "knowspec")
    here, cache = tmp_path / "here", tmp_path / "cache"
    here.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    done = subprocess.run([knowspec, "conform", "--target", toy_target(), "--contract", str(toy_contract),
                           "--check", "input_valid_accepted", "--max-examples", "3"],
                          cwd=here, env={**env, "XDG_CACHE_HOME": str(cache)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(here.iterdir()) == []
    assert (cache / "knowspec" / "hypothesis").is_dir()

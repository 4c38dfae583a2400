"""The pytest plugin turns each (check, tool) case into a test that passes, fails or skips."""

from __future__ import annotations

import pytest

from toy_paths import toy_target

pytest_plugins = ["pytester"]

TEST_FILE = """
def test_conformance(conform_case):
    conform_case.check()
"""


def test_plugin_reports_failing_cases_by_check_id(pytester: pytest.Pytester, toy_contract):
    pytester.makepyfile(TEST_FILE)
    result = pytester.runpytest_subprocess(
        "-p", "knowspec.conformance.pytest_plugin", "--conform-target", toy_target("flip_truncated"), "--conform-contract", str(toy_contract),
        "--conform-max-examples", "5", "-k", "truncation or tools_list", "-q")
    result.assert_outcomes(passed=3, failed=1, skipped=0)
    result.stdout.fnmatch_lines(["*truncation*search_concepts*"])


def test_plugin_errors_on_every_case_without_a_target(pytester: pytest.Pytester, toy_contract, monkeypatch):
    monkeypatch.delenv("KNOWSPEC_CONFORM_TARGET", raising=False)
    pytester.makepyfile(TEST_FILE)
    result = pytester.runpytest_subprocess("-p", "knowspec.conformance.pytest_plugin", "--conform-contract", str(toy_contract), "-q", "-k", "tools_list")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*no --conform-target given*"])
    assert result.ret != 0


def test_plugin_errors_on_every_case_when_the_target_is_unreachable(pytester: pytest.Pytester, toy_contract):
    pytester.makepyfile(TEST_FILE)
    result = pytester.runpytest_subprocess(
        "-p", "knowspec.conformance.pytest_plugin", "--conform-target", "stdio:/nonexistent/knowspec-no-such-server",
        "--conform-contract", str(toy_contract), "-q", "-k", "tools_list")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*target unreachable*"])


def test_pool_import_options_reach_the_run_config():
    from pathlib import Path

    from knowspec.conformance import pytest_plugin

    options = {"--conform-target": "http://127.0.0.1:1/mcp", "--conform-contract": None, "--conform-family": "docpool",
               "--conform-era": "legacy", "--conform-max-examples": 3, "--conform-seed": 7, "--conform-baseline": None,
               "--conform-rest-url": "http://127.0.0.1:1", "--conform-admin-user": "admin",
               "--conform-admin-password": "pw", "--conform-reader-user": "reader",
               "--conform-reader-password": "rpw", "--conform-pool-dir": "/srv/pools",
               "--conform-bearer-token": "tok", "--conform-advertised-only": True}

    class Config:
        @staticmethod
        def getoption(name):
            return options[name]

    run = pytest_plugin._config(Config)
    assert (run.rest_url, run.admin_user, run.admin_password, run.reader_user, run.reader_password, run.pool_dir) == (
        "http://127.0.0.1:1", "admin", "pw", "reader", "rpw", Path("/srv/pools"))
    assert run.bearer_token == "tok"
    assert run.advertised_only is True

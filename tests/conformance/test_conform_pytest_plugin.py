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


def test_plugin_skips_everything_without_a_target(pytester: pytest.Pytester, toy_contract):
    pytester.makepyfile(TEST_FILE)
    result = pytester.runpytest_subprocess("-p", "knowspec.conformance.pytest_plugin", "--conform-contract", str(toy_contract), "-q", "-k", "tools_list")
    result.assert_outcomes(skipped=2)

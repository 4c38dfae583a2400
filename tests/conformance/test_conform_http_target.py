"""The same checks reach a server over streamable HTTP, in both protocol eras."""

from __future__ import annotations

import sys

import pytest

from toy_paths import TARGETS
from knowspec.conformance.config import RunConfig
from knowspec.conformance.runner import run_to_end
from knowspec.conformance.target import Target, connect
from serving import free_port, serving


@pytest.fixture(scope="module")
def http_url():
    port = free_port()
    with serving([sys.executable, str(TARGETS / "toy_server.py"), "--http", str(port)], port) as base:
        yield base + "/mcp"


@pytest.mark.parametrize("era,version", [("legacy", "2025-11-25"), ("modern", "2026-07-28")])
def test_era_is_negotiated_as_asked(http_url, era, version):
    with connect(Target(http_url, era)) as conn:
        assert conn.client.protocol_version == version
        assert {t["name"] for t in conn.list_tools()} == {"search_concepts", "get_neighbors"}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_checks_pass_over_http(http_url, toy_contract, era):
    finished = run_to_end(RunConfig(target=http_url, era=era, contract_path=toy_contract, max_examples=5,
                                    checks=("tools_list", "unknown_tool", "truncation", "differential_search")))
    assert finished.exit_code == 0, [(r.case_id, r.reason) for r in finished.results if r.status != "passed"]

"""rest_importdoc passes on a conforming REST app and fails, under its id, on broken ones."""

from __future__ import annotations

import threading
import time

import pytest
import uvicorn
from toy_rest import build

from knowspec.conformance.config import RunConfig
from knowspec.conformance.runner import run_to_end
from serving import free_port


# The shipped contract: IMPORTDOC fills document pools, so a contract without their tools (the
# toy's, OKF only) plans no rest_importdoc case.
SHIPPED_CONTRACT = None


@pytest.fixture
def rest_url():
    servers = []

    def start(variant: str) -> str:
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(build(variant), host="127.0.0.1", port=port, log_level="error"))
        threading.Thread(target=server.run, daemon=True).start()
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        servers.append(server)
        return f"http://127.0.0.1:{port}"

    yield start
    for server in servers:
        server.should_exit = True


def _run(target: str, url: str, **creds):
    finished = run_to_end(RunConfig(target=target, contract_path=SHIPPED_CONTRACT, rest_url=url,
                                    checks=("rest_importdoc",), **creds))
    return {r.case_id: r for r in finished.results}




def test_conforming_rest_app_passes(rest_url, target_for):
    results = _run(target_for("good"), rest_url("good"), admin_user="admin", admin_password="secret")
    assert results["rest_importdoc"].status == "passed", results["rest_importdoc"]


@pytest.mark.parametrize("variant", ["plain_401", "leak_path"])
def test_broken_rest_app_fails_rest_importdoc(variant, rest_url, target_for):
    results = _run(target_for("good"), rest_url(variant), admin_user="admin", admin_password="secret")
    assert results["rest_importdoc"].status == "failed"


def test_wrong_admin_password_is_reported(rest_url, target_for):
    results = _run(target_for("good"), rest_url("good"), admin_user="admin", admin_password="nope")
    assert results["rest_importdoc"].status == "failed"
    assert "login" in results["rest_importdoc"].failure.message


def test_without_rest_url_the_check_skips(target_for):
    finished = run_to_end(RunConfig(target=target_for("good"), contract_path=SHIPPED_CONTRACT,
                                    checks=("rest_importdoc",)))
    assert [r.status for r in finished.results] == ["skipped"]


def test_a_run_judging_no_pool_tool_plans_no_rest_importdoc(toy_contract, target_for):
    finished = run_to_end(RunConfig(target=target_for("good"), contract_path=toy_contract, checks=("rest_importdoc",)))
    assert finished.results == () and "plans no case" in finished.unreachable

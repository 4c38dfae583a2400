"""Run the conformance suite inside a project's own pytest session, one test per (check, tool).

Enable with ``-p knowspec.conformance.pytest_plugin`` or ``pytest_plugins = [...]`` in the rootdir
``conftest.py`` (the options must be known before arguments are parsed), then::

    def test_conformance(conform_case):
        conform_case.check()

and run ``pytest --conform-target 'stdio:knowspec serve --stdio'`` (or set
``KNOWSPEC_CONFORM_TARGET``). The suite runs once per session, on first use; each
parametrised case then passes, fails with the check's message, or skips with its reason.
Without a target, or with a target that cannot be reached, every case is an error: a
conformance job that checked nothing must never look green.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import ContractError, load_contract
from knowspec.conformance.events import CheckFinished, RunFinished

_RESULTS_KEY = pytest.StashKey[RunFinished]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("knowspec-conform", "knowspec conformance suite")
    group.addoption("--conform-target", default=os.environ.get("KNOWSPEC_CONFORM_TARGET"),
                    help="stdio:<command> or http(s) URL of the server under test")
    group.addoption("--conform-contract", default=os.environ.get("KNOWSPEC_CONFORM_CONTRACT"),
                    help="contract.json (default: knowspec.generated)")
    group.addoption("--conform-family", default="all", choices=("okf", "docpool", "all"))
    group.addoption("--conform-era", default="legacy", choices=("legacy", "modern"))
    group.addoption("--conform-max-examples", type=int, default=15)
    group.addoption("--conform-seed", type=int, default=0)
    group.addoption("--conform-baseline", default=None)
    # The document-pool fixture is imported through REST IMPORTDOC only with these (see the CLI).
    group.addoption("--conform-rest-url", default=os.environ.get("KNOWSPEC_CONFORM_REST_URL"))
    group.addoption("--conform-admin-user", default=os.environ.get("KNOWSPEC_CONFORM_ADMIN_USER"))
    group.addoption("--conform-admin-password", default=os.environ.get("KNOWSPEC_CONFORM_ADMIN_PASSWORD"),
                    help="prefer the environment variable: command lines are visible to other users")
    group.addoption("--conform-reader-user", default=os.environ.get("KNOWSPEC_CONFORM_READER_USER"))
    group.addoption("--conform-reader-password", default=os.environ.get("KNOWSPEC_CONFORM_READER_PASSWORD"))
    group.addoption("--conform-bearer-token", default=os.environ.get("KNOWSPEC_CONFORM_TOKEN"),
                    help="HTTP: bearer token sent on every MCP request (default: the admin login's)")
    group.addoption("--conform-pool-dir", default=os.environ.get("KNOWSPEC_CONFORM_POOL_DIR"),
                    help="where the generated source pool is written (the target must read it)")
    group.addoption("--conform-advertised-only", action="store_true",
                    help="judge only the contract tools the target lists (a server implementing a part)")


def _config(config: pytest.Config) -> RunConfig:
    contract = config.getoption("--conform-contract")
    baseline = config.getoption("--conform-baseline")
    pool_dir = config.getoption("--conform-pool-dir")
    return RunConfig(target=config.getoption("--conform-target") or "", family=config.getoption("--conform-family"),
                     era=config.getoption("--conform-era"), seed=config.getoption("--conform-seed"),
                     max_examples=config.getoption("--conform-max-examples"),
                     contract_path=Path(contract) if contract else None,
                     baseline=Path(baseline) if baseline else None,
                     rest_url=config.getoption("--conform-rest-url"),
                     admin_user=config.getoption("--conform-admin-user"),
                     admin_password=config.getoption("--conform-admin-password"),
                     reader_user=config.getoption("--conform-reader-user"),
                     reader_password=config.getoption("--conform-reader-password"),
                     pool_dir=Path(pool_dir) if pool_dir else None,
                     bearer_token=config.getoption("--conform-bearer-token"),
                     advertised_only=config.getoption("--conform-advertised-only"))


def planned_case_ids(run_config: RunConfig) -> list[str]:
    """``check[tool]`` ids known before running, from the contract and the check registry."""
    from knowspec.conformance.runner import plan, selected_checks

    contract = load_contract(run_config.contract_path).for_family(run_config.family).only(run_config.tools)
    return [f"{spec.id}[{tool.name}]" if tool else spec.id for spec, tool in plan(selected_checks(run_config), contract)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "conform_case" not in metafunc.fixturenames:
        return
    try:
        ids = planned_case_ids(_config(metafunc.config))
    except ContractError as exc:
        ids = [f"contract-unavailable: {exc}"[:120]]
    metafunc.parametrize("conform_case_id", ids, ids=ids)


@dataclass
class ConformCase:
    case_id: str
    result: CheckFinished | None
    unreachable: str = ""

    def check(self) -> None:
        if self.unreachable:
            pytest.fail(self.unreachable, pytrace=False)
        if self.result is None:
            pytest.fail(f"{self.case_id}: the case was planned but did not run", pytrace=False)
        if self.result.status in ("failed", "error"):
            f = self.result.failure
            detail = f"{f.message}\nrule: {f.rule}\ninput: {f.arguments!r}\nresponse: {f.response!r}" if f else ""
            pytest.fail(f"{self.case_id}: {detail or self.result.reason}", pytrace=False)
        if self.result.status in ("skipped", "accepted"):
            pytest.skip(self.result.reason or self.result.status)


@pytest.fixture(scope="session")
def conform_run(request: pytest.FixtureRequest) -> Any:
    """The whole suite's ``RunFinished`` (run once), or why it could not run (each case errors)."""
    from knowspec.conformance.events import TargetUnreachable
    from knowspec.conformance.runner import run

    run_config = _config(request.config)
    if not run_config.target:
        raise pytest.UsageError("no --conform-target given (or KNOWSPEC_CONFORM_TARGET): the conformance "
                                "cases cannot run; pass stdio:\"<command>\" or an http(s) URL")
    finished, unreachable = None, ""
    for event in run(run_config):
        if isinstance(event, TargetUnreachable):
            unreachable = event.message
        if isinstance(event, RunFinished):
            finished = event
    return finished if not unreachable else f"target unreachable: {unreachable}"


@pytest.fixture
def conform_case(conform_run: Any, conform_case_id: str) -> ConformCase:
    """One planned case's outcome; an unreachable target makes it an error in setup."""
    if isinstance(conform_run, str):
        raise RuntimeError(conform_run)
    by_id = {r.case_id: r for r in conform_run.results}
    return ConformCase(conform_case_id, by_id.get(conform_case_id))

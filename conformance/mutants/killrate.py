"""Kill rate: run the suite through each mutant proxy and count mutants some check noticed.

A mutant is *killed* when a case fails through it that passed through the ``identity`` proxy
(the unmutated baseline), so pre-existing server failures never count as kills.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, replace
from typing import Iterator

from knowspec.conformance.config import RunConfig
from knowspec.conformance.mutants.catalogue import CLIENT_MUTANTS, MUTANTS
from knowspec.conformance.mutants.proxy import PAIRING
from knowspec.conformance.runner import run_to_end

ALL_MUTANTS = (*MUTANTS, *CLIENT_MUTANTS, PAIRING)


@dataclass(frozen=True)
class MutantResult:
    name: str
    killed: bool
    killed_by: tuple[str, ...]       # case ids that failed only under the mutant
    unreachable: bool = False


def proxy_target(mutant: str, server_argv: list[str]) -> str:
    proxy = [sys.executable, "-m", "knowspec.conformance.mutants.proxy", "--mutant", mutant, "--"]
    return "stdio:" + shlex.join(proxy + server_argv)


def failing_cases(config: RunConfig) -> tuple[set[str], bool]:
    finished = run_to_end(config)
    unreachable = not finished.results and finished.exit_code == 2
    return {r.case_id for r in finished.results if r.status in ("failed", "error")}, unreachable


def kill_rate(base: RunConfig, server_argv: list[str], names: list[str] | None = None) -> Iterator[MutantResult]:
    """Yield one result per mutant; the first item is the identity baseline (never 'killed')."""
    baseline, unreachable = failing_cases(replace(base, target=proxy_target("identity", server_argv)))
    yield MutantResult("identity", False, tuple(sorted(baseline)), unreachable)
    for name in names or ALL_MUTANTS:
        failed, unreachable = failing_cases(replace(base, target=proxy_target(name, server_argv)))
        new = tuple(sorted(failed - baseline))
        yield MutantResult(name, bool(new) or unreachable, new, unreachable)

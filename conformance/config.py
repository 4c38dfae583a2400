"""One run's settings, built by the CLI or the pytest plugin and handed to the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunConfig:
    target: str
    family: str = "all"                 # okf | docpool | all
    era: str = "legacy"                 # legacy | modern
    seed: int = 0
    max_examples: int = 25
    time_budget: float | None = None    # seconds for the whole run
    call_timeout: float = 30.0
    contract_path: Path | str | None = None   # a file, or git:REV
    baseline: Path | None = None
    bundle_dir: Path | None = None      # None: a temp dir the runner creates and removes
    rest_url: str | None = None
    admin_user: str | None = None
    admin_password: str | None = None
    unknown_tool: str = "jsonrpc"       # profile: jsonrpc (-32602) | result (isError) | either
    checks: tuple[str, ...] = ()        # empty: every registered check
    tools: tuple[str, ...] = ()         # empty: every contract tool of the family
    advertised_only: bool = False       # judge the tools the target lists; the others are skipped, not failed
    shared_session: bool = False        # one session for the whole run instead of one per worker
    workers: int = 3                    # sessions judged in parallel (each keeps its session across cases)
    strict: bool = False                # a skipped contract area (areas.py) fails the run
    exclude: tuple[str, ...] = field(default_factory=tuple)
    # The document-pool fixture (checks/docpool_import.py): imported only with rest_url + admin.
    pool_dir: Path | None = None        # where the source pool is written; None: the bundle dir
    pool_database: str | None = None    # database IMPORTDOC writes; None: the admin session's
    pool_token: str | None = None       # names the fixture's collections and keys; None: fresh per run
    reader_user: str | None = None      # a REST user without SYSADMIN (non-admin and ACL checks)
    reader_password: str | None = None
    pool_fixture: Path | None = None    # a written pool fixture (fixtures/pools.py) the target was started on
    pool: Any = None                    # set by the runner: this run's PoolRun (imported, failed, discovered)
    # MCP over HTTP: the bearer token sent on every request (None: log in as the admin when
    # rest_url and admin credentials are given, else connect anonymously), and the ACL
    # principals it stands for (None: unknown, judged as an anonymous caller "*").
    bearer_token: str | None = None
    mcp_principals: frozenset[str] | None = None
    login_refused: str | None = None    # why that REST login failed (then the run connects without a token)

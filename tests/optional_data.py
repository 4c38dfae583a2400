"""Optional data sets that live outside the repository, named by environment settings.

The suite is self-contained: every default test runs on bundles the project writes itself.
Two larger sets are extras that run only when their folder is named:

- ``KNOWSPEC_UPSTREAM_FIXTURES``: the okf-fixtures folder (its ``fixtures/`` tree is read);
  tests marked ``upstream_fixtures`` use it.
- ``KNOWSPEC_CORPUS_DIR``: the corpora folder holding ``databricks-okf``; tests marked
  ``corpus`` use it.

``tests/conftest.py`` skips marked tests with one reason per setting when it is unset, and
stops the run when a setting names a folder that does not exist. This module is the only place
that reads these settings in tests.
"""

from __future__ import annotations

import os
from pathlib import Path

UPSTREAM_FIXTURES_ENV = "KNOWSPEC_UPSTREAM_FIXTURES"
CORPUS_ENV = "KNOWSPEC_CORPUS_DIR"

SKIP_REASONS = {
    "upstream_fixtures": f"upstream OKF fixture set: set {UPSTREAM_FIXTURES_ENV} to the okf-fixtures folder",
    "corpus": f"large OKF corpus: set {CORPUS_ENV} to the corpora folder holding databricks-okf",
}
ENV_OF_MARK = {"upstream_fixtures": UPSTREAM_FIXTURES_ENV, "corpus": CORPUS_ENV}
# Where a marked test looks when its setting is unset; never read, because the test is skipped.
_UNSET = Path("/nonexistent-optional-data")


def _folder(env: str) -> Path | None:
    value = os.environ.get(env, "").strip()
    return Path(value).expanduser().resolve() if value else None


def is_set(mark: str) -> bool:
    return _folder(ENV_OF_MARK[mark]) is not None


def misconfigured() -> list[str]:
    """Settings that name a folder which does not exist (a typo should not look like a skip)."""
    return [f"{env}={folder} is not a folder" for env in ENV_OF_MARK.values()
            if (folder := _folder(env)) is not None and not folder.is_dir()]


UPSTREAM_FIXTURES = (_folder(UPSTREAM_FIXTURES_ENV) or _UNSET) / "fixtures"
DATABRICKS = (_folder(CORPUS_ENV) or _UNSET) / "databricks-okf"


def cases(found: list[str]) -> list[str]:
    """Parameters listed from an optional folder; one placeholder (skipped) when it is unset."""
    return found or ["(optional data not set)"]

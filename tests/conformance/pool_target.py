"""Our server started on the suite's pool fixture, for the kill-rate tests of the pool oracles (not a test module)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from knowspec.conformance.fixtures.pools import PoolFixtureSet, write_fixture

KNOWSPEC = shutil.which("knowspec") or str(Path(sys.executable).parent / "knowspec")


def served_fixture(tmp_path: Path, *, vectors: bool = False) -> tuple[PoolFixtureSet, list[str]]:
    """The fixture (seed 0) written under ``tmp_path``, registered as its database in an appdir
    there, and the stdio command of a server on it; ``vectors``: embedded with the mutant host's
    tiny model pack first. Skips when the console script is not installed."""
    if not Path(KNOWSPEC).exists():
        pytest.skip("knowspec console script not installed")
    fixture = write_fixture(tmp_path / "pool", seed=0)
    if vectors:
        _mutant_host().add_vectors(fixture.directory)
    app = tmp_path / "app"
    for command in (["pool", "register", fixture.database, "--storage", "SQLITE", "--dsn",
                     str(fixture.directory / "docs.db")],
                    ["pool", "alter", f"ALTER DATABASE {fixture.database} SET DOCUMENTS INTERNAL"]):
        subprocess.run([KNOWSPEC, *command, "--appdir", str(app)], check=True, capture_output=True)
    return fixture, [KNOWSPEC, "serve", "--stdio", "--appdir", str(app), "--help-db",
                     str(fixture.directory / "help.db"), "--database", fixture.database]


def _mutant_host():
    spec = importlib.util.spec_from_file_location("mutant_host", Path(__file__).parent / "mutant_host.py")
    assert spec is not None and spec.loader is not None
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    return host

"""The suite against the real knowspec server (over stdio, as any client would reach it)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from knowspec.conformance.config import RunConfig
from knowspec.conformance.runner import run_to_end

KNOWSPEC = shutil.which("knowspec") or str(Path(sys.executable).parent / "knowspec")


@pytest.mark.slow
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_real_server_passes_the_read_tool_checks(era):
    if not Path(KNOWSPEC).exists():
        pytest.skip("knowspec console script not installed")
    finished = run_to_end(RunConfig(target=f"stdio:{KNOWSPEC} serve --stdio", family="okf", era=era,
                                    tools=("search_concepts", "get_neighbors", "list_concepts"),
                                    max_examples=5, shared_session=True))
    bad = [(r.case_id, r.failure.message if r.failure else r.reason)
           for r in finished.results if r.status in ("failed", "error")]
    assert finished.results and bad == []

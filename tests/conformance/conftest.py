"""Fixtures: the toy contract on disk and target strings for the toy server's variants."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "targets"))

from toy_paths import toy_target  # noqa: E402
from toy_schemas import contract  # noqa: E402


@pytest.fixture(scope="session")
def toy_contract(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("contract") / "contract.json"
    path.write_text(json.dumps(contract()), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def target_for():
    return toy_target


@pytest.fixture(scope="session")
def our_graph(tmp_path_factory: pytest.TempPathFactory):
    """``our_graph(bundle)``: the bundle written to a fresh folder and our get_semantic_graph's
    ``@graph`` of it, called in process (for the oracles' own tests)."""
    from knowspec.impl.context import CallContext
    from knowspec.impl.okf.tools.query import get_semantic_graph
    from tool_args import tool_args

    def graph_of(bundle) -> list:
        root = bundle.write(tmp_path_factory.mktemp(bundle.name))
        out = get_semantic_graph(tool_args("get_semantic_graph", bundle_path=str(root)), CallContext())
        return out.structured["@graph"]

    return graph_of

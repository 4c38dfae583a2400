"""A tiny spec (tests/codegen/mini_spec) generated into an importable package for pipeline tests."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from knowspec.codegen.build import produce
from knowspec.codegen.check import write_tree

MINI_SPEC = Path(__file__).parent.parent / "codegen" / "mini_spec"


@pytest.fixture(scope="session")
def mini_registry(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    write_tree(produce(MINI_SPEC), root / "mini_generated")
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("mini_generated.registry")
    finally:
        sys.path.remove(str(root))

"""Benchmark modules (``benchmarks/NAME.py``) imported by the tests of their pure rules."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def import_benchmark(name: str) -> ModuleType:
    """``benchmarks/NAME.py``; the calling test module is skipped when its imports (onnxruntime)
    are not installed. A benchmark sets the variables its servers need (``KNOWSPEC_QUERY_VECTORS=0``,
    ...) in ``main``, never at import; any it set at import anyway are undone here, or every runtime
    this test process made later would read them (the query-vector cache off for the rest of the suite)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    with mock.patch.dict(os.environ):
        return pytest.importorskip(name, reason="the benchmark's imports (onnxruntime) are not installed")

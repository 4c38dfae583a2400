"""Where the toy targets live and how the suite addresses them (shared by the tests)."""

from __future__ import annotations

import sys
from pathlib import Path

TARGETS = Path(__file__).parent


def toy_target(variant: str = "good") -> str:
    return f"stdio:{sys.executable} {TARGETS / 'toy_server.py'} --variant {variant}"

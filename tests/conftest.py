"""Suite-wide hooks: the optional data markers (see ``optional_data``), and ``runtime``: a fresh
process runtime (every cache empty) for one test."""

from __future__ import annotations

import pytest

import optional_data
from knowspec.impl import runtime as process


def pytest_configure(config):
    for mark, reason in optional_data.SKIP_REASONS.items():
        config.addinivalue_line("markers", f"{mark}: needs the {reason}")
    if problems := optional_data.misconfigured():
        raise pytest.UsageError("; ".join(problems))


def pytest_collection_modifyitems(config, items):
    for mark, reason in optional_data.SKIP_REASONS.items():
        if optional_data.is_set(mark):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if item.get_closest_marker(mark):
                item.add_marker(skip)


@pytest.fixture
def runtime():
    """A fresh, activated runtime: handlers called directly (``CallContext()``) use it; closed after."""
    with process.activated() as fresh:
        yield fresh


@pytest.fixture
def runtime_settings(monkeypatch):
    """``set(**changes)``: the current runtime's settings with these changes, for this test only
    (the runtime reads the environment once, so a test changes the settings, not the variables)."""
    import dataclasses

    def set_(**changes):
        current = process.current()
        monkeypatch.setattr(current, "settings", dataclasses.replace(current.settings, **changes))

    return set_

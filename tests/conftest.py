"""Suite-wide hooks: the optional data markers (see ``optional_data``), ``runtime``: a fresh
process runtime (every cache empty) for one test, ``full_temporary_folder``, and the property
tests' settings (no per-example deadline: speed is the benchmarks' to judge, and a loaded host
made the default 200 ms deadline fail rules that held)."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import settings

import optional_data
from knowspec.impl import runtime as process

settings.register_profile("knowspec", deadline=None)
settings.load_profile("knowspec")


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


class _FullDisk:
    """A temporary file that takes no bytes (``write`` fails as on a full disk); ``closed`` tells
    whether its holder let it go."""

    closed = False

    def write(self, data):
        raise OSError(28, "No space left on device")

    def close(self):
        self.closed = True


@pytest.fixture
def full_temporary_folder(monkeypatch):
    """Every nameless temporary file made in this test is one that cannot be written; the
    fixture's value is that file (see ``impl/nameless_files``)."""
    full = _FullDisk()
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda **kwargs: full)
    return full

"""Values derived per snapshot revision (impl/okf/derived.py)."""

from __future__ import annotations

import pytest

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.derived import derived_cache, per_snapshot


class _Snapshot:
    root, revision = "/kb", "r1"


def test_a_remembered_resource_limit_keeps_no_traceback(runtime):
    """The bound hit while building is remembered for the revision, but not the frames of the
    build, which hold the half-built value (a whole bundle's index, on a large bundle)."""
    builds = []

    def build():
        half_built = [bytearray(1024)]  # noqa: F841 (what the traceback's frames would keep)
        builds.append(1)
        raise ToolError("resource_limit", "section search exceeds bounds")

    for _ in range(2):
        with pytest.raises(ToolError) as exc:
            per_snapshot(_Snapshot(), "sections", build)
        assert (exc.value.code, exc.value.message) == ("resource_limit", "section search exceeds bounds")
    assert builds == [1]  # remembered: the second call did not build again
    remembered = derived_cache(runtime).peek(("/kb", "sections"))
    assert isinstance(remembered, ToolError) and remembered.__traceback__ is None

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


def test_list_concepts_keeps_its_text_as_utf8_and_answers_the_same_text_again(runtime, tmp_path):
    """A title outside the BMP would make the kept str four bytes a character."""
    from knowspec.generated.models.okf.list_concepts_input_schema import ListConceptsInput
    from knowspec.impl.context import CallContext
    from knowspec.impl.okf.tools.read import list_concepts

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text('---\ntype: Note\ntitle: "Launch \U0001F680 plan"\n---\nbody\n', encoding="utf-8")
    (kb / "b.md").write_text("---\ntype: Note\ntitle: Plain\n---\nbody\n", encoding="utf-8")
    args = ListConceptsInput.model_validate({"bundle_path": str(kb)})
    first = list_concepts(args, CallContext(runtime=runtime)).text
    kept = derived_cache(runtime).peek((str(kb), "list_concepts.text"))
    assert kept == first.encode("utf-8") and "\U0001F680" in first
    assert list_concepts(args, CallContext(runtime=runtime)).text == first

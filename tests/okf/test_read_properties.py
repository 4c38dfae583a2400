"""Property tests of the read tools' ordering and counting rules over generated bundles."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowspec.impl.okf.validation.diagnostics import diagnostic_key
from okf_helpers import list_concepts, validate, write_bundle

_NAME = st.text(alphabet="aZé_-. 1#", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..") and not s.endswith(".") and s.strip() == s and s not in ("index", "log")
)
_BODY = st.sampled_from(["", "[x](a.md)", "[y](missing.md#h)", "# H\n\n[z](#h)", "no frontmatter"])


def _bundle(root: str, names, bodies) -> Path:
    files = {}
    for i, (name, body) in enumerate(zip(names, bodies)):
        folder = "sub/" if i % 2 else ""
        files[f"{folder}{name}.md"] = body if body == "no frontmatter" else f"---\ntype: T\n---\n{body}\n"
    return write_bundle(Path(root) / "kb", files)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_NAME, min_size=1, max_size=8, unique=True), st.lists(_BODY, min_size=8, max_size=8))
def test_list_is_byte_sorted_and_covers_every_concept_file(names, bodies):
    with tempfile.TemporaryDirectory() as tmp:
        kb = _bundle(tmp, names, bodies)
        ids = [c["id"] for c in list_concepts(kb).structured["concepts"]]
        on_disk = {os.path.relpath(os.path.join(d, f), kb)[:-3] for d, _, fs in os.walk(kb) for f in fs}
    assert ids == sorted(ids, key=lambda s: s.encode("utf-8"))
    assert set(ids) == on_disk


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_NAME, min_size=1, max_size=8, unique=True), st.lists(_BODY, min_size=8, max_size=8))
def test_validate_diagnostics_are_ordered_and_counted(names, bodies):
    with tempfile.TemporaryDirectory() as tmp:
        out = validate(_bundle(tmp, names, bodies), strict=True, check_links=True, check_orphans=True).structured
    diags = out["diagnostics"]
    assert diags == sorted(diags, key=diagnostic_key)
    errors = sum(d["severity"] == "ERROR" for d in diags)
    assert out["conformance"] == {"conformant": errors == 0, "errors": errors}
    assert out["guidance"]["warnings"] + out["guidance"]["info"] + errors == len(diags)


_doc_text = st.text(alphabet="-\n\r a:é€\U0001f600#`", max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_doc_text, st.builds(lambda fm, body: f"---\n{fm}\n---\n{body}", _doc_text, _doc_text),
                 st.builds(lambda fm, body: f"---\r\n{fm}\r\n---\r\n{body}", _doc_text, _doc_text)))
def test_document_texts_cut_from_raw_equal_the_split(text):
    """A Document keeps byte ranges, not texts: its body and frontmatter text, cut from the raw
    bytes on each use, equal what the split of the decoded text gives."""
    from knowspec.impl.okf.model import Document
    from knowspec.impl.okf.parsing.frontmatter import FrontmatterError, split_document

    raw = text.encode("utf-8")
    doc = Document("a.md", raw)
    try:
        split = split_document(text)
    except FrontmatterError:
        assert doc.parse_error is not None and (doc.body, doc.frontmatter_yaml) == ("", "")
        return
    if doc.parse_error is None:  # the YAML itself may still fail to load
        assert (doc.body, doc.frontmatter_yaml) == (split.body, split.frontmatter_yaml)
        assert doc.markdown.body == split.body

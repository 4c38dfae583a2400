"""OKF text fallbacks are Go encoding/json bytes, as okf-mcp writes them (spec/README.md#text-encoders)."""

from __future__ import annotations

import asyncio
import json

import pytest

from knowspec.impl.server.pipeline import ToolRuntime
from okf_helpers import write_bundle

CONCEPT = "---\ntype: Note\ntitle: Cost Allocation & Margin <v2>\n---\n# Cost & margin\n\nSplit costs <fairly>.\n"


@pytest.fixture(scope="module")
def runtime():
    return ToolRuntime()


@pytest.fixture()
def bundle(tmp_path):
    return write_bundle(tmp_path / "b", {"index.md": "# Index\n\n- [Cost](cost.md)\n", "cost.md": CONCEPT})


def call(runtime, name, **arguments):
    result = asyncio.run(runtime.call(name, arguments))
    assert not result.is_error, result.content[0].text
    return result


@pytest.mark.parametrize(("tool", "extra"), [
    ("list_concepts", {}),
    ("search_concepts", {"query": "cost"}),
    ("search_sections", {"query": "costs"}),
    ("read_concept", None),
])
def test_html_characters_in_titles_are_escaped_as_go_escapes_them(runtime, bundle, tool, extra):
    if extra is None:
        result = call(runtime, tool, bundle_path=str(bundle), concept_id="cost")
        assert result.content[0].text == CONCEPT  # read_concept's fallback is the raw file, not JSON
        return
    text = call(runtime, tool, bundle_path=str(bundle), **extra).content[0].text
    assert "Cost Allocation \\u0026 Margin \\u003cv2\\u003e" in text or "\\u0026" in text
    assert not {"<", ">", "&"} & set(text)
    json.loads(text)


def test_list_concepts_legacy_summary_bytes(runtime, bundle):
    text = call(runtime, "list_concepts", bundle_path=str(bundle)).content[0].text
    assert text == ('{"concepts":[{"id":"cost","type":"Note","title":"Cost Allocation \\u0026 Margin \\u003cv2\\u003e",'
                    '"path":"cost.md"}]}')


def test_json_fallback_is_the_go_encoding_of_the_structured_result(runtime, bundle):
    result = call(runtime, "search_concepts", bundle_path=str(bundle), query="margin")
    text = result.content[0].text
    assert json.loads(text) == result.structured_content
    assert "\\u0026" in text

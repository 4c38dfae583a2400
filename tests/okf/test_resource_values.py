"""How the v0.2 graph classifies a path-valued field (impl/okf/graph/resource_values.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.okf.graph.resource_values import ResolvedResource, clean_path, resolve_resource

CAPTURED = {"data/table.csv", "notes/data/x.csv", "http:", "cdn/lib.js", "references/runbook.txt"}


def kind(value: str, *, source: bool = False, at: str = "notes/c.md") -> tuple[str, str | None, bool] | None:
    resolved = resolve_resource(value, at, CAPTURED, source=source)
    return None if resolved is None else (resolved.kind, resolved.path, resolved.exists)


@pytest.mark.parametrize("value, want", [
    ("https://x.test/a", ("url", None, False)),
    ("bigquery://project.dataset.orders", ("url", None, False)),
    ("mailto:team@x.test", ("url", None, False)),        # any scheme: a URL for every field but a source's
    ("/data/table.csv", ("bundle-relative", "data/table.csv", True)),
    ("//data/table.csv", ("bundle-relative", "data/table.csv", True)),   # a captured file wins over "//host"
    ("//cdn.test/lib.js", ("url", None, False)),
    ("./data/x.csv", ("relative", "notes/data/x.csv", True)),
    ("data/x.csv", ("relative", "notes/data/x.csv", True)),   # a bare path is a path outside sources
    ("dashboards/exec", ("relative", "notes/dashboards/exec", False)),
    ("../data/table.csv#L2", ("relative", "data/table.csv", True)),   # the ?/# suffix names no other file
    ("../../up.txt", ("relative", None, False)),          # leaves the root: a kind, no path
    ("/../up.txt", ("bundle-relative", None, False)),
    ("/", ("bundle-relative", None, False)),
    ("#only-a-fragment", ("ambiguous", None, False)),
    ("C:/Users/x.txt", ("ambiguous", None, False)),
    ("docs\\x.txt", ("ambiguous", None, False)),
    ("https://x.test/%zz", ("ambiguous", None, False)),   # a URL with a broken escape
    ("a%zz/b", ("relative", "notes/a%zz/b", False)),     # in a path a percent is a character
    ("all queries in project X", ("relative", "notes/all queries in project X", False)),
    ("  /data/table.csv  ", ("bundle-relative", "data/table.csv", True)),   # trimmed first
    ("   ", None),                                        # blank: no kind at all
])
def test_a_concept_resource_is_classified_by_the_first_rule_that_applies(value, want):
    assert kind(value) == want


@pytest.mark.parametrize("value, want", [
    ("https://x.test/a", ("url", None, False)),
    ("mailto:team@x.test", ("url", None, False)),
    ("URN:isbn:123", ("url", None, False)),
    ("project:dataset", ("ambiguous", None, False)),      # a scheme alone is no source URL
    ("bq:proj.ds", ("ambiguous", None, False)),
    ("all queries in project X", ("scope", None, False)),
    ("all queries in project X.Y", ("ambiguous", None, False)),   # a dot or slash: no scope
    ("dashboards/exec-revenue", ("ambiguous", None, False)),
    ("references/runbook.txt", ("relative", "references/runbook.txt", True)),   # captured: a path after all
    ("./missing.txt", ("relative", "missing.txt", False)),
    ("/missing.txt", ("bundle-relative", "missing.txt", False)),
])
def test_a_source_resource_is_a_path_only_when_captured_or_said_so(value, want):
    assert kind(value, source=True, at="c.md") == want


def test_a_file_named_like_a_scheme_is_still_the_file():
    assert kind("http:", at="c.md") == ("relative", "http:", True)


def test_control_characters_make_a_url_ambiguous_and_leave_a_path_a_path():
    assert kind("https://x.test/\x01") == ("ambiguous", None, False)
    assert kind("a\x01b") == ("relative", "notes/a\x01b", False)


def test_the_raw_value_is_kept_as_written():
    assert resolve_resource(" ./a ", "c.md", set(), source=False) == ResolvedResource(" ./a ", "relative", "a")


segments = st.lists(st.sampled_from(["a", "b", ".", "..", ""]), max_size=8)


@given(segments)
def test_a_cleaned_path_has_no_dot_or_empty_segments_and_climbs_only_at_its_start(parts):
    cleaned = clean_path("/".join(parts))
    kept = cleaned.removeprefix("/").split("/")
    assert cleaned in (".", "/") or ("." not in kept and "" not in kept)
    climbs = [p == ".." for p in kept]
    assert climbs == sorted(climbs, reverse=True)   # every ".." before the first name
    assert clean_path(cleaned) == cleaned

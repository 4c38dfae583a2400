"""Pure read-side rules: heading IDs, link scanner and resolution, relation refs, temporal
profiles, versions, YAML scalar meaning."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.parsing.frontmatter import YamlScalar, load_yaml_mapping
from knowspec.impl.okf.concept.ids import format_ref, parse_ref
from knowspec.impl.okf.parsing.links import classify_link, resolve_link_target, scan_line_links
from knowspec.impl.okf.parsing.markdown import analyse_body, heading_id_base, unique_heading_ids
from knowspec.impl.okf.concept.relations import collect_relations
from knowspec.impl.okf.concept.temporal import INSTANT_PROFILE, is_stale, parse_as_of, value_valid

HEADING_IDS = [
    ("# Hello, World!", "hello-world"), ("# FOO", "foo"), ("#", "heading"),
    ("## `records(self, zone, params={})`", "recordsself-zone-params"), ("## API   Reference", "api---reference"),
    ("## snake_case and kebab-case", "snake-case-and-kebab-case"), ("## A -- B", "a----b"),
    ("## What's new?", "whats-new"), ("## v1.2.3 Release Notes", "v123-release-notes"), ("## C++ & C#", "c--c"),
    ("## Title ###", "title"), ("## Foo \\#", "foo-"), ("## 100% done", "100-done"),
    ("## Foo &amp; Bar", "foo-amp-bar"), ("## [Docs](https://x.io/a)", "docshttpsxioa"),
    ("## _emphasis_ *strong*", "-emphasis--strong"), ("## Foo {#custom}", "foo-custom"),
    ("## -leading and trailing-", "-leading-and-trailing-"), ("## ???", "heading"), ("## Straße", "strae"),
    ("## Über uns", "ber-uns"), ("## Café", "caf"), ("## İstanbul", "stanbul"), ("## ışık", "k"),
    ("## Şişli Ofis", "ili-ofis"), ("## Привет мир", "-"), ("## Привет", "heading"), ("## ФАЗА 2: Итоги", "-2-"),
    ("## 日本語", "heading"), ("## 日本語 Guide", "-guide"), ("## 🚀 Launch", "-launch"), ("## Launch 🚀", "launch-"),
    ("## A\u00a0B", "ab"), ("## １２３", "heading"), ("Getting\nStarted\n=======", "started"),
    ("> ## Notes", "notes"), ("- ## Item heading", "item-heading"),
]


@pytest.mark.parametrize(("source", "anchor"), HEADING_IDS, ids=[h[0] for h in HEADING_IDS])
def test_goldmark_heading_ids(source, anchor):
    assert [h.anchor for h in analyse_body(source).headings] == [anchor]


@pytest.mark.parametrize(
    ("sources", "anchors"),
    [
        (["API", "API", "API", "API-1"], ["api", "api-1", "api-2", "api-1-1"]),
        (["api-1", "API", "API"], ["api-1", "api", "api-2"]),
        (["Привет", "日本語", "Heading"], ["heading", "heading-1", "heading-2"]),
    ],
)
def test_heading_id_duplicates_in_document_order(sources, anchors):
    body = "\n\n".join(f"# {s}" for s in sources)
    assert [h.anchor for h in analyse_body(body).headings] == anchors


@given(st.lists(st.text(alphabet="aAb -_1é", max_size=6), max_size=12))
def test_issued_heading_ids_are_unique_and_prefixed_by_base(texts):
    bases = [heading_id_base(t.encode()) for t in texts]
    ids = unique_heading_ids(bases)
    assert len(set(ids)) == len(ids)
    assert all(i == b or i.startswith(b + "-") for i, b in zip(ids, bases))


def test_heading_inside_code_is_not_an_anchor():
    body = "```\n# Fake heading\n```\n\n# Real\n"
    assert [h.anchor for h in analyse_body(body).headings] == ["real"]


SCANNER = [
    ('See [A](a.md) and [B](../b.md "Title").', ["a.md", "../b.md"]),
    ("[a](b.md  't')", ["b.md"]), ("[a](b.md (T))", ["b.md (T)"]), ("[a](my file.md)", ["my file.md"]),
    ('[a](my file.md "T")', ['my file.md "T"']), ("![diagram](img/arch.png)", ["img/arch.png"]),
    ("[a [nested] label](x.md)", ["x.md"]), ("[outer [inner](y.md)", ["y.md"]), ("[fn](f(1).md)", ["f(1).md"]),
    ("[a\\]b](c.md)", ["c.md"]), ("\\[not](z.md)", []), ("\\\\[yes](z.md)", ["z.md"]),
    ("[a] (b.md)", []), ("[ref][id]", []), ("<https://x.test>", []), ("[a](<x(1>)", []),
    ("[a](b.md)(c.md)", ["b.md"]), ("[](x.md)", ["x.md"]),
]


@pytest.mark.parametrize(("line", "targets"), SCANNER, ids=[s[0] for s in SCANNER])
def test_line_scanner(line, targets):
    assert scan_line_links(line) == targets


def test_links_in_code_spans_and_fences_are_not_links():
    body = "`[code](c.md)` [real](r.md)\n\n```\n[fenced](f.md)\n```\n[^1]: see [x](y.md)\n"
    assert [link.target for link in analyse_body(body).links] == ["r.md", "y.md"]


@pytest.mark.parametrize(
    ("target", "kind"),
    [("", "other"), ("#x", "anchor"), ("https://a.b", "external"), ("//cdn/x", "external"),
     ("MAILTO:a@b", "external"), ("data:x", "external"), ("/abs.md", "absolute"), ("rel.md", "relative")],
)
def test_link_classification(target, kind):
    assert classify_link(target) == kind


@pytest.mark.parametrize(
    ("source", "target", "resolved"),
    [
        ("a/b", "c.md", "a/c"), ("a/b", "../c.md#x", "c"), ("a/b", "/x/y.md?q", "x/y"),
        ("a/b", "../../../../c.md", "c"), ("a/b", "dir/", None), ("a/b", "https://x/y.md", None),
        ("a/b", "a%20b.md", "a/a%20b"), ("a/b", "index.md", "a/index"), ("a/b", "img.png", "a/img.png"),
    ],
)
def test_navigation_resolution(source, target, resolved):
    assert resolve_link_target(source, target) == resolved


@given(st.lists(st.sampled_from(["..", ".", "x", "y", ""]), max_size=8))
def test_navigation_never_escapes_the_root(segments):
    resolved = resolve_link_target("a/b/c", "/".join(segments) + "/z.md")
    assert resolved is None or (".." not in resolved.split("/") and not resolved.startswith("/"))


@pytest.mark.parametrize(
    ("ref", "parsed"),
    [("hash\\#name", ("hash#name", None)), ("a#section", ("a", "section")), ("hash\\#name#frag", ("hash#name", "frag")),
     ("source\\part", None), ("source\\", None), ("source\\\\#part", None), ("/abs", None), ("a.md", None),
     ("http:x", None), ("a#", None), (" a", None), ("a#b#c", None)],
)
def test_relation_ref_grammar(ref, parsed):
    assert parse_ref(ref) == parsed


@given(st.text(alphabet="ab#/ ", min_size=1, max_size=8), st.one_of(st.none(), st.text(alphabet="xy", min_size=1, max_size=3)))
def test_relation_ref_round_trips(concept_id, fragment):
    parsed = parse_ref(format_ref(concept_id, fragment))
    if parsed is not None:
        assert parsed == (concept_id, fragment)


def test_relations_extension_with_escaped_ids_and_nested_fragments():
    fm = load_yaml_mapping(
        "type: T\nrelations:\n  depends_on:\n    - target: 'hash\\#name'\n    - target: tables/orders#col\n"
        "  type: [{target: x}]\ncolumns:\n  - id: col\n    relations: {feeds: [{target: b}]}\n"
    )
    rels = [(r.from_ref, r.to_ref, r.relation_type) for r in collect_relations("a", fm)]
    assert rels == [("a", "hash\\#name", "depends_on"), ("a", "tables/orders#col", "depends_on"), ("a#col", "b", "feeds")]


AS_OF_DATE = [("2026-07-01", True), ("2026-7-1", False), ("2026-02-30", False), ("2026-07-01T00:00:00Z", False)]
AS_OF_INSTANT = [
    ("2026-07-01T10:00:00Z", True), ("2026-07-01T10:00:00.123456789+07:00", True), ("2026-07-01T10:00:00-00:00", False),
    ("2026-07-01t10:00:00Z", False), ("2026-07-01T10:00:00z", False), ("2026-07-01T10:00:00,5Z", False),
    ("2026-07-01T10:00:00", False), ("2026-07-01T10:00:00+24:00", False), ("2026-07-01", False),
    ("2026-06-30T23:59:60Z", False),
]


@pytest.mark.parametrize(("value", "ok"), AS_OF_DATE)
def test_as_of_date_profile_matrix(value, ok):
    if ok:
        assert parse_as_of(value, "date-3fcbb9f").echo == value
    else:
        with pytest.raises(ToolError, match='must be YYYY-MM-DD'):
            parse_as_of(value, "date-3fcbb9f")


@pytest.mark.parametrize(("value", "ok"), AS_OF_INSTANT)
def test_as_of_instant_profile_matrix(value, ok):
    if ok:
        assert parse_as_of(value, INSTANT_PROFILE) is not None
    else:
        with pytest.raises(ToolError, match="RFC3339 datetime with UTC offset"):
            parse_as_of(value, INSTANT_PROFILE)


def test_instant_echo_trims_fraction_and_prints_zero_offset_as_z():
    assert parse_as_of("2026-07-01T10:00:00.500000000+00:00", INSTANT_PROFILE).echo == "2026-07-01T10:00:00.5Z"
    assert parse_as_of("2026-07-01T10:00:00.120+02:00", INSTANT_PROFILE).echo == "2026-07-01T10:00:00.12+02:00"


def test_instant_staleness_is_exact_to_the_nanosecond():
    boundary = "2026-09-23T18:00:00.123456789+07:00"
    assert is_stale(boundary, parse_as_of("2026-09-23T11:00:00.123456789Z", INSTANT_PROFILE))
    assert not is_stale(boundary, parse_as_of("2026-09-23T11:00:00.123456788Z", INSTANT_PROFILE))


@pytest.mark.parametrize(
    ("value", "profile", "ok"),
    [("2026-07-01", "date-3fcbb9f", True), ("2026-07-01T00:00:00Z", "date-3fcbb9f", False),
     ("2026-07-01", INSTANT_PROFILE, False), ("2026-07-01T00:00:00Z", INSTANT_PROFILE, True)],
)
def test_profile_values_are_never_converted(value, profile, ok):
    assert value_valid(load_yaml_mapping(f"v: {value}")["v"], profile) is ok


def test_yaml_scalars_keep_yaml_1_2_meaning():
    fm = load_yaml_mapping("a: no\nb: on\nc: 2026-06-19\nd: 0.2\ne: '0.2'\nf: true\ng:\n")
    assert type(fm["a"]) is str and type(fm["b"]) is str
    assert isinstance(fm["c"], YamlScalar) and fm["c"].tag == "timestamp" and fm["c"] == "2026-06-19"
    assert fm["d"].tag == "float" and type(fm["e"]) is str
    assert fm["f"].tag == "bool" and fm["f"].value is True
    assert fm["g"].tag == "null"


def test_duplicate_keys_are_recorded_and_explicit_keys_override_merges():
    fm = load_yaml_mapping("type: a\ntype: b\nbase: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n")
    assert "type" in fm.duplicates
    assert fm["m"] == {"x": "3", "y": "2"} and "x" not in fm["m"].duplicates


@pytest.mark.parametrize(
    ("source", "target", "resolved"),
    [("a", "b.md#x", "b"), ("a", "/c/d.md", "c/d"), ("a", "../e.md", "e"), ("x/y/a", "b.md#x", "x/y/b"),
     ("x/y/a", "../e.md", "x/e"), ("x/a", "https://h/x.md", None)],
)
def test_resolve_navigation_matches_single_link_resolution(source, target, resolved):
    from knowspec.impl.okf.parsing.links import resolve_navigation
    from knowspec.impl.okf.parsing.markdown import RawLink

    (link,) = resolve_navigation(source, [RawLink(target, 1)])
    assert link.target_id == resolved == resolve_link_target(source, target)


@pytest.mark.parametrize(
    ("body", "messages"),
    [
        ("## 2026-06-21\n* entry\n  wrapped line\n* second\n", []),
        ("## 2026-06-21\n* entry\n  - nested\n", ['log date group contains non-list entry: "- nested"']),
        ("# Log\n\nintro\n\n## 2026-06-21\n- a\n\n## 2026-06-21\n- b\n", []),
        ("just text\n", ["log.md should contain ISO-8601 date headings"]),
        ("", []),
    ],
)
def test_log_structure_rules(body, messages):
    from knowspec.impl.okf.validation.reserved_files import log_findings

    assert [m for _f, m in log_findings(body)] == messages


@pytest.mark.parametrize(
    ("body", "messages"),
    [
        ("# Title\n\nIntro prose.\n\n## Group\n\n- [a](a.md)\n", []),
        ("# Title\n\n## Group\n\n- [a](a.md)\n", []),
        ("# Title\n\n## Empty\n\n## Group\n\n- [a](a.md)\n", ['index.md section has no entries: "Empty"']),
    ],
)
def test_index_structure_rules(body, messages):
    from knowspec.impl.okf.validation.reserved_files import index_findings

    assert [m for _f, m in index_findings(body)] == messages


def _scan_by_depth(line: str) -> list[str]:
    """The scanner as it was, from every ``[`` counting depth to its ``]`` (quadratic): the
    oracle the one-pass pairing must agree with."""
    from knowspec.impl.okf.parsing.links import strip_link_title

    out, n, i = [], len(line), 0
    while i < n:
        i = line.find("[", i)
        if i < 0:
            break
        k = 0
        while i - k - 1 >= 0 and line[i - k - 1] == "\\":
            k += 1
        found = None if k % 2 else _depth_link(line, i)
        if found is None:
            i += 1
            continue
        out.append(strip_link_title(found[0]))
        i = found[1]
    return out


def _depth_link(line: str, start: int):
    text_end = _closing(line, start + 1, "[]")
    if text_end is None or text_end + 1 >= len(line) or line[text_end + 1] != "(":
        return None
    dest_end = _closing(line, text_end + 2, "()")
    return None if dest_end is None else (line[text_end + 2:dest_end], dest_end + 1)


def _closing(line: str, i: int, pair: str):
    """Where depth 1 opened just before ``i`` returns to 0, backslashes escaping; None if never."""
    depth = 1
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        depth += {pair[0]: 1, pair[1]: -1}.get(line[i], 0)
        if depth == 0:
            return i
        i += 1
    return None


@given(st.text(alphabet="[]()\\ab. \"", max_size=40))
def test_the_line_scanner_finds_what_scanning_by_depth_finds(line):
    assert scan_line_links(line) == _scan_by_depth(line)


@pytest.mark.parametrize("line", ["[" * 50_000 + "x" + "](" * 20_000, "[" * 30_000 + "](" * 30_000 + ")" * 10,
                                  "\\" + "[a\\" * 30_000 + "](b"])
def test_a_line_of_unclosed_brackets_is_scanned_at_once(line):
    from time_guard import within

    with within(5):
        scan_line_links(line)

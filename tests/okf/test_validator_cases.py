"""``validate_bundle`` base, link and orphan diagnostics on small bundles written here.

One case per rule of spec/okf/contract/read.md §1.3, §1.6, §1.10 and §3.3, with the exact
message texts of gaps.md §3.3. These are the project's own counterparts of the upstream fixture
directories (link, negative, orphan, parsing), which still run as an optional set in
``test_read_fixtures.py``.
"""

from __future__ import annotations

import os

import pytest

from okf_helpers import validate, write_bundle

OK = "---\ntype: Note\n---\nText.\n"
INDEX = "# Notes\n\n- [A](a.md)\n"

# name -> (files, validate flags, expected [(severity, code, file, message)])
CASES = {
    "missing-frontmatter": ({"a.md": "# A\n"}, {},
                            [("ERROR", "concept_frontmatter_missing", "a.md", "missing YAML frontmatter block")]),
    "frontmatter-after-blank-line": ({"a.md": "\n---\ntype: Note\n---\n"}, {},
                                     [("ERROR", "concept_frontmatter_missing", "a.md", "missing YAML frontmatter block")]),
    "empty-type": ({"a.md": "---\ntype: ''\n---\n"}, {},
                   [("ERROR", "concept_type_invalid", "a.md", "missing or empty 'type' field")]),
    "duplicated-type": ({"a.md": "---\ntype: A\ntype: B\n---\n"}, {},
                        [("ERROR", "concept_type_invalid", "a.md", "'type' field should be declared exactly once")]),
    "invalid-utf8": ({"a.md": b"---\ntype: Note\n---\n\xff\n"}, {},
                     [("ERROR", "concept_unparseable", "a.md",
                       "unparseable concept document: invalid encoding: invalid UTF-8")]),
    "unterminated-frontmatter": ({"a.md": "---\ntype: Note\n"}, {},
                                 [("ERROR", "concept_unparseable", "a.md",
                                   "unparseable concept document: unterminated frontmatter")]),
    "crlf-parses-like-lf": ({"a.md": "---\r\ntype: Note\r\n---\r\nText.\r\n"}, {}, []),
    "delimiter-in-body-is-markdown": ({"a.md": "---\ntype: Note\n---\nOne.\n---\nTwo.\n"}, {}, []),
    "nested-index-with-frontmatter": ({"index.md": "# Root\n\n- [S](sub/index.md)\n",
                                       "sub/index.md": "---\nx: 1\n---\n# Sub\n\n- [A](a.md)\n", "sub/a.md": OK}, {},
                                      [("ERROR", "index_structure_invalid", "sub/index.md",
                                        "index.md should not contain frontmatter")]),
    "index-list-before-heading": ({"index.md": "- [A](a.md)\n\n# Notes\n\n- [A](a.md)\n", "a.md": OK}, {},
                                  [("ERROR", "index_structure_invalid", "index.md",
                                    "index.md list entry appears before any heading")]),
    "index-entry-without-link": ({"index.md": "# Notes\n\n- just words\n", "a.md": OK}, {},
                                 [("ERROR", "index_structure_invalid", "index.md",
                                   "index.md list entry should contain a Markdown link"),
                                  ("ERROR", "index_structure_invalid", "index.md", 'index.md section has no entries: "Notes"'),
                                  ("ERROR", "index_structure_invalid", "index.md",
                                   "index.md should contain at least one linked list entry")]),
    "index-title-then-intro-is-fine": ({"index.md": "# Notes\n\nIntro prose.\n\n## All\n\n- [A](a.md)\n", "a.md": OK},
                                       {}, []),
    "log-with-frontmatter": ({"log.md": "---\nx: 1\n---\n## 2026-01-02\n\n- one\n", "a.md": OK}, {},
                             [("ERROR", "log_structure_invalid", "log.md", "log.md should not contain frontmatter")]),
    "log-date-not-iso": ({"log.md": "## March 2, 2026\n\n- one\n", "a.md": OK}, {},
                         [("ERROR", "log_structure_invalid", "log.md",
                           'log date heading is not ISO-8601 YYYY-MM-DD: "March 2, 2026"')]),
    "log-date-not-a-calendar-day": ({"log.md": "## 2026-02-30\n\n- one\n", "a.md": OK}, {},
                                    [("ERROR", "log_structure_invalid", "log.md",
                                      'log date heading is not ISO-8601 YYYY-MM-DD: "2026-02-30"')]),
    "log-date-at-level-3": ({"log.md": "## 2026-03-02\n\n- one\n\n### 2026-03-01\n\n- two\n", "a.md": OK}, {},
                            [("ERROR", "log_structure_invalid", "log.md",
                              'log date heading should use level 2: "### 2026-03-01"')]),  # the raw line
    "log-oldest-first": ({"log.md": "## 2026-01-01\n\n- one\n\n## 2026-02-01\n\n- two\n", "a.md": OK}, {},
                         [("ERROR", "log_structure_invalid", "log.md",
                           'log date headings should be newest first: "2026-02-01"')]),
    "log-paragraph-in-group": ({"log.md": "## 2026-01-01\n\n- one\n\nA paragraph.\n", "a.md": OK}, {},
                               [("ERROR", "log_structure_invalid", "log.md",
                                 'log date group contains non-list entry: "A paragraph."')]),
    "log-group-without-items": ({"log.md": "## 2026-01-02\n\n- one\n\n## 2026-01-01\n", "a.md": OK}, {},
                                [("ERROR", "log_structure_invalid", "log.md",
                                  'log date heading has no entries: "2026-01-01"')]),
    "log-title-and-wrapped-item-are-fine": ({"log.md": "# Log\n\n## 2026-01-02\n\n- one item\n  wrapped.\n", "a.md": OK},
                                            {}, []),
    "orphan-file": ({"index.md": INDEX, "a.md": OK, "b.md": OK}, {"check_orphans": True},
                    [("WARN", "orphan_unlisted", "b.md", "orphan file (not linked in index.md)")]),
    "orphan-folder-without-index": ({"index.md": INDEX, "a.md": OK, "sub/b.md": OK}, {"check_orphans": True},
                                    [("INFO", "orphan_index_missing", "sub",
                                      "missing index.md, skipping orphan check for this directory")]),
    "orphan-root-without-index": ({"a.md": OK}, {"check_orphans": True},  # the root "." is no file path
                                  [("INFO", "orphan_index_missing", "",
                                    "missing index.md, skipping orphan check for this directory")]),
    "reserved-files-are-never-orphans": ({"index.md": INDEX, "a.md": OK, "log.md": "## 2026-01-01\n\n- one\n"},
                                         {"check_orphans": True}, []),
    "broken-link": ({"a.md": OK + "[x](./missing.md)\n"}, {"check_links": True},
                    [("INFO", "link_target_missing", "a.md", 'broken link to "./missing.md" (target not found)')]),
    "missing-anchor": ({"a.md": OK + "[x](b.md#ghost)\n", "b.md": "---\ntype: Note\n---\n# Real\n"},
                       {"check_links": True},
                       [("WARN", "link_anchor_missing", "a.md", "anchor not found in target file: b.md#ghost")]),
    "duplicate-heading-anchor": ({"a.md": OK + "[x](b.md#api-1)\n", "b.md": "---\ntype: Note\n---\n# API\n\n# API\n"},
                                 {"check_links": True}, []),
    "heading-in-code-is-no-anchor": ({"a.md": OK + "[x](b.md#fake-heading)\n",
                                      "b.md": "---\ntype: Note\n---\n```\n# Fake heading\n```\n"}, {"check_links": True},
                                     [("WARN", "link_anchor_missing", "a.md",
                                       "anchor not found in target file: b.md#fake-heading")]),
    "fragment-only-link": ({"a.md": "---\ntype: Note\n---\n# Local heading\n\n[x](#local-heading)\n"},
                           {"check_links": True}, []),
    "external-links-are-not-checked": ({"a.md": OK + "[x](https://example.invalid/a) [m](mailto:a@example.invalid)\n"},
                                       {"check_links": True}, []),
    "folder-link-with-index": ({"a.md": OK + "[s](sub/)\n", "sub/index.md": "# Sub\n\n- [B](b.md)\n", "sub/b.md": OK},
                               {"check_links": True}, []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_validator_case(name, tmp_path):
    files, flags, expected = CASES[name]
    kb = write_bundle(tmp_path / "kb", files)
    got = validate(kb, **flags).structured["diagnostics"]
    assert sorted((d["severity"], d["code"], d["file"], d["message"]) for d in got) == sorted(expected)


def test_symlinked_file_is_neither_captured_nor_a_link_target(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"real.md": OK, "a.md": OK + "[x](alias.md)\n"})
    os.symlink("real.md", kb / "alias.md")
    out = validate(kb, check_links=True).structured
    assert out["scanned_files"] == 2
    assert [(d["code"], d["file"], d["message"]) for d in out["diagnostics"]] == [
        ("link_target_missing", "a.md", 'broken link to "alias.md" (target not found)')]

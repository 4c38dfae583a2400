"""The pool builder: frontmatter, chunking, pool.yaml, the sample corpus and an OKF bundle."""

from __future__ import annotations

import re
import sqlite3
import stat
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from docpool_sample import SAMPLE, sample_config, sample_topics
from knowspec.impl.docpool.builder import add_pool_build_parser, build_pool, chunk_sections, split_frontmatter
from knowspec.impl.docpool.recipe import import_collection
from knowspec.impl.docpool.storage.base import UNRESTRICTED
from knowspec.impl.docpool.fulltext.search import search_hits
from knowspec.impl.docpool.storage.sqlite import SqlitePool

from optional_data import DATABRICKS
from time_guard import within

WIKI_EXPORT = Path(__file__).resolve().parents[1] / "fixtures" / "okf" / "wiki-export"


def test_chunk_sections_splits_at_headings_with_paths():
    body = "# T\n\nintro\n\n## A\n\none\n\n### B\n\ntwo\n\n```\n# not a heading\n```\n\n## C\n\nthree\n"
    chunks = chunk_sections("T", body)
    assert [(c.ord, c.heading) for c in chunks] == [(0, ""), (1, "A"), (2, "A > B"), (3, "C")]
    assert "# not a heading" in chunks[2].body


def test_chunk_sections_always_gives_one_chunk():
    assert len(chunk_sections("T", "")) == 1


def test_split_frontmatter_without_frontmatter():
    assert split_frontmatter("# x\n") == ({}, "# x\n")


def test_sample_corpus_builds_with_every_part(tmp_path):
    counts = build_pool(SAMPLE, tmp_path / "help.db", "netsim-help", title="Yardım", erisim="herkes")
    topics, config = sample_topics(), sample_config()
    assert counts["topic"] == len(topics) >= 20
    assert counts["entity"] == len(config["entities"])
    assert counts["acl"] == sum(len(f.get("acl", [])) for f in topics.values())
    langs = {"tr": 0, "en": 0}
    for f in topics.values():
        langs["tr" if any(c in f["title"] for c in "ıİşŞğçöüÇÖÜ") else "en"] += 1
    assert min(langs.values()) >= 5
    con = sqlite3.connect(tmp_path / "help.db")
    rels = {r[0] for r in con.execute('select rel from "doc$entity_rel"')}
    assert rels == {"opens", "opens_mobile"}
    templates = [r[0] for r in con.execute('select url_template from "doc$entity_kind"')]
    assert all("<key>" in t and "<v3>" in t for t in templates)
    assert con.execute('select value from "doc$meta" where collection = \'\' and name = \'search_stopwords\'').fetchone()[0]


def test_fts_index_holds_folded_text(tmp_path):
    build_pool(SAMPLE, tmp_path / "help.db", "netsim-help", title="", erisim="herkes")
    with SqlitePool(tmp_path / "help.db") as pool:
        hits = search_hits(pool, '"isik"*', UNRESTRICTED, limit=5, weights=[1, 1, 1], snippet_column="body")
    assert [h.slug for h in hits] == ["doviz-kurlari"]
    assert "[Işık]" in hits[0].snippet


def test_cli_parser_builds(tmp_path, capsys):
    import argparse
    parser = argparse.ArgumentParser()
    add_pool_build_parser(parser.add_subparsers())
    ns = parser.parse_args(["build", str(SAMPLE), str(tmp_path / "p.db"), "--collection", "ornek"])
    assert ns.func(ns) == 0
    assert '"topic": %d' % len(sample_topics()) in capsys.readouterr().out


def test_import_replaces_only_its_collection(tmp_path):
    build_pool(SAMPLE, tmp_path / "a.db", "alpha", title="", erisim="herkes")
    build_pool(SAMPLE, tmp_path / "b.db", "beta", title="", erisim="kisitli")
    target = tmp_path / "pool.db"
    import_collection(target, tmp_path / "a.db", "alpha")
    first = import_collection(target, tmp_path / "b.db", "beta")
    again = import_collection(target, tmp_path / "b.db", "beta")
    assert first == again and first.topics == len(sample_topics())
    with SqlitePool(target) as pool:
        assert {c.id: c.topics for c in pool.collections(UNRESTRICTED)} == {"alpha": first.topics, "beta": first.topics}
        assert pool.counts(UNRESTRICTED)["chunk"] == 2 * first.chunks
        hits = search_hits(pool, '"stok"*', UNRESTRICTED, limit=50, weights=[1, 1, 1], snippet_column="body")
        assert {h.collection for h in hits} == {"alpha", "beta"}


def test_okf_bundle_becomes_a_collection_with_concepts_tags_and_aliases(tmp_path):
    counts = build_pool(WIKI_EXPORT, tmp_path / "wiki.db", "wiki", title="Wiki export", erisim="herkes")
    assert counts["topic"] == 3
    assert counts["chunk"] > counts["topic"]
    with SqlitePool(tmp_path / "wiki.db") as pool:
        hits = search_hits(pool, '"reefer"*', UNRESTRICTED, limit=5, weights=[10, 5, 1], snippet_column="body")
        assert [h.collection for h in hits] == ["wiki"]
        assert pool.aliases_named("concept", "XD")[0].key == "cross-docking"
        assert pool.aliases_named("concept", "temperature-controlled shipping")[0].key == "cold-chain"
        assert pool.aliases_named("concept", "cold-chain") == []  # the slug itself is not an alias


@pytest.mark.slow
@pytest.mark.corpus
def test_databricks_okf_bundle_becomes_a_collection(tmp_path):
    counts = build_pool(DATABRICKS, tmp_path / "dbx.db", "databricks", title="Databricks", erisim="herkes")
    concepts = len(list((DATABRICKS / "concepts").glob("*.md")))
    assert counts["topic"] == concepts > 5000
    assert counts["chunk"] > counts["topic"]
    with SqlitePool(tmp_path / "dbx.db") as pool:
        hits = search_hits(pool, '"column"* AND "mask"*', UNRESTRICTED, limit=5, weights=[10, 5, 1], snippet_column="body")
        assert len(hits) == 5 and all(h.collection == "databricks" for h in hits)
        assert pool.aliases_named("concept", "ACMP")[0].key == "abac-column-mask-policy"


def test_built_pool_is_left_in_rollback_journal_mode(tmp_path):
    """Readers open it read-only; a WAL file would need writable -shm beside it."""
    build_pool(SAMPLE, tmp_path / "help.db", "netsim-help", title="", erisim="herkes")
    assert sqlite3.connect(tmp_path / "help.db").execute("pragma journal_mode").fetchone()[0] == "delete"
    assert not (tmp_path / "help.db-wal").exists()


_LAZY_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")  # the pattern the builder used to run


@given(st.text(alphabet=" \t#ab-", min_size=1, max_size=30))
def test_a_heading_reads_as_the_lazy_pattern_read_it(rest):
    line = "## " + rest
    old = _LAZY_HEADING.match(line)
    chunks = chunk_sections("T", line + "\nbody")
    if old is None:
        assert chunks[0].heading == ""
    else:
        assert chunks[0].heading == old.group(2).strip()


def test_a_heading_line_of_many_blanks_is_read_at_once():
    with within(5):
        chunks = chunk_sections("T", "# a" + " " * 200_000 + "b\nbody")
    assert chunks[0].heading.startswith("a") and chunks[0].heading.endswith("b")


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b]\n"


def _build_cli(source: Path, out: Path) -> int:
    import argparse

    parser = argparse.ArgumentParser()
    add_pool_build_parser(parser.add_subparsers())
    ns = parser.parse_args(["build", str(source), str(out), "--collection", "ornek"])
    return ns.func(ns)


def test_yaml_aliases_are_refused_in_frontmatter_and_in_pool_yaml(tmp_path, capsys):
    """An alias bomb had grown a build past 8 GB of memory."""
    (tmp_path / "one").mkdir()  # an alias in a topic stops the build naming it (its ACL was dropped with it)
    (tmp_path / "one" / "t.md").write_text(f"---\nslug: t\nacl: &r [muhasebe]\nroles: *r\n{ALIAS_BOMB}---\nbody\n")
    assert _build_cli(tmp_path / "one", tmp_path / "one.db") == 1
    assert "t.md: frontmatter: aliases (*name) are not allowed here" in capsys.readouterr().err
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.md").write_text("---\nslug: a\n---\n# A\n\ntext\n")
    (tmp_path / "src" / "pool.yaml").write_text(ALIAS_BOMB)
    assert _build_cli(tmp_path / "src", tmp_path / "p.db") == 1
    assert "pool.yaml is not usable YAML: aliases (*name) are not allowed here" in capsys.readouterr().err


def test_a_failed_build_leaves_the_pool_that_was_there(tmp_path, capsys):
    """The build had removed the old pool first: a refused file left an empty one in its place."""
    out = tmp_path / "help.db"
    build_pool(SAMPLE, out, "netsim-help")
    before = out.read_bytes()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "t.md").write_text("---\nslug: t\nacl: &r [muhasebe]\nroles: *r\n---\nbody\n")
    assert _build_cli(tmp_path / "bad", out) == 1
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "help.db"]  # no staging file left
    (tmp_path / "bad" / "t.md").write_text("---\nslug: t\n---\nbody\n")
    assert _build_cli(tmp_path / "bad", out) == 0  # and a good build replaces it
    with sqlite3.connect(out) as con:
        assert con.execute('select id from "doc$collection"').fetchall() == [("ornek",)]


def test_a_rebuilt_pool_keeps_the_old_files_permission_bits(tmp_path):
    """The server's group reads a pool of mode 0640; a rebuild had given it the umask's 0644."""
    out = tmp_path / "help.db"
    build_pool(SAMPLE, out, "netsim-help")
    out.chmod(0o640)
    build_pool(SAMPLE, out, "netsim-help")
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_a_build_over_a_pool_in_wal_mode_folds_its_wal_first_or_refuses_while_it_is_read(tmp_path, capsys):
    """SQLite applies a non-empty -wal it finds beside a database whatever that database is: a
    reader opening the new pool before the old WAL was gone read the old pool's pages on it."""
    out = tmp_path / "help.db"
    build_pool(SAMPLE, out, "netsim-help")
    writer = sqlite3.connect(out)
    writer.execute("pragma journal_mode = wal")
    writer.execute('update "doc$topic" set title = \'OLD-WAL\'')
    writer.commit()
    reader = sqlite3.connect(out)
    reader.execute("begin")
    reader.execute('select count(*) from "doc$topic"').fetchone()  # a read inside the WAL now
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "t.md").write_text("---\nslug: t\ntitle: New\n---\nbody\n")
    assert _build_cli(tmp_path / "src", out) == 1
    assert "help.db is being read or written in WAL mode" in capsys.readouterr().err
    reader.close()
    assert _build_cli(tmp_path / "src", out) == 0  # the writer's connection is idle: its WAL is folded
    writer.close()
    with sqlite3.connect(out) as con:
        assert con.execute('select title from "doc$topic"').fetchall() == [("New",)]


def test_a_file_that_is_not_utf8_refuses_the_build_naming_it(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "t.md").write_bytes(b"---\nslug: t\n---\nbody \xff here\n")
    assert _build_cli(tmp_path / "src", tmp_path / "p.db") == 1
    assert "t.md: not UTF-8 text (byte 0xff at offset 21)" in capsys.readouterr().err
    (tmp_path / "src" / "t.md").write_text("---\nslug: t\n---\nbody\n")
    (tmp_path / "src" / "pool.yaml").write_bytes(b"meta:\n  x: \xc3\n")
    assert _build_cli(tmp_path / "src", tmp_path / "p.db") == 1
    assert "pool.yaml: not UTF-8 text (byte 0xc3 at offset 11)" in capsys.readouterr().err
    assert not (tmp_path / "p.db").exists()


def test_a_build_keeps_the_caps_importdoc_holds_a_pool_to(tmp_path, capsys, monkeypatch):
    """A pool IMPORTDOC would refuse (and whose served reads would cost what its caps prevent)."""
    from knowspec.impl.docpool import builder

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "t.md").write_text("---\nslug: t\ntitle: " + "T" * ((64 << 10) + 1) + "\n---\nbody\n")
    assert _build_cli(tmp_path / "src", tmp_path / "p.db") == 1
    assert "the pool would hold a topic whose title is over 64 KiB in collection ornek" in capsys.readouterr().err
    (tmp_path / "src" / "t.md").write_text("---\nslug: t\n---\n" + "b" * (1 << 20) + "\n")
    monkeypatch.setattr(builder, "MAX_TEXT_BYTES", 1 << 20)  # the file is read only when under the cap
    assert _build_cli(tmp_path / "src", tmp_path / "p.db") == 1
    assert "t.md: over 1 MiB, a topic's cap" in capsys.readouterr().err
    assert not (tmp_path / "p.db").exists()


def test_a_build_reads_regular_files_inside_its_folder_only(tmp_path):
    import os

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("---\nslug: a\n---\n# A\n\ninside\n")
    (tmp_path / "secret.md").write_text("---\nslug: secret\n---\n# Secret\n\noutside\n")
    (src / "link.md").symlink_to(tmp_path / "secret.md")   # a link out of the folder: left out
    (src / "sub").mkdir()
    (src / "sub" / "b.md").write_text("# B\n\nalso inside\n")
    (src / "inner.md").symlink_to(src / "sub" / "b.md")    # a link inside it: read
    os.mkfifo(src / "pipe.md")                             # had hung the build for ever
    counts = build_pool(src, tmp_path / "p.db", "ornek")
    assert counts["topic"] == 3
    with sqlite3.connect(tmp_path / "p.db") as con:
        assert sorted(r[0] for r in con.execute('select slug from "doc$topic"')) == ["a", "inner", "sub/b"]


def test_frontmatter_after_a_byte_order_mark_is_read():
    assert split_frontmatter("\ufeff---\nslug: s\n---\nbody\n") == ({"slug": "s"}, "body\n")


def test_a_number_in_an_acl_is_a_name():
    from knowspec.impl.docpool.builder import _principals

    assert _principals([1001, "muhasebe"], "t.md") == ["1001", "muhasebe"]


def test_acl_entries_that_are_not_names_refuse_the_build(tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.md").write_text("---\nslug: a\nacl: [{x: 1}, muhasebe]\n---\n# A\n\ntext\n")
    assert _build_cli(tmp_path / "src", tmp_path / "p.db") == 1
    assert "a.md: acl entries must be user or role names, found {'x': 1}" in capsys.readouterr().err

"""IMPORTDOC over REST reads only the operator's import folder, only real pool tables, and a
storage failure's ``retryable`` is the one in spec/errors.toml."""

from __future__ import annotations

import os
import sqlite3

import pytest

from knowspec.impl.config import Settings
from knowspec.impl.docpool import catalog
from knowspec.impl.docpool.importdoc import OUTSIDE_IMPORT_DIR, import_collection
from knowspec.impl.errors import ToolError, default_retryable

from test_import_pools import file_digest, make_pool, topics_of


@pytest.fixture()
def settings(tmp_path):
    s = Settings(appdir=tmp_path / "app")
    s.import_path.mkdir(parents=True)
    catalog.register_database(s.catalog_path, "sales", "SQLITE", str(tmp_path / "sales.db"))
    catalog.execute_alter(s.catalog_path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    return s


def confined(settings, path: str, collection: str = "manuals") -> dict:
    return import_collection(settings, "sales", collection, path, confine=True)


def test_a_source_in_the_import_folder_is_imported_by_absolute_or_relative_path(settings):
    source = make_pool(settings.import_path / "src.db", "manuals", topics_of(2))
    assert confined(settings, str(source))["result"] is True
    outcome = confined(settings, "src.db")
    assert outcome["result"] is True and outcome["source"] == "src.db"


def test_outside_the_import_folder_existing_and_missing_files_get_the_same_answer(settings, tmp_path):
    existing = make_pool(tmp_path / "outside.db", "manuals", topics_of(2))
    answers = [confined(settings, p) for p in (
        str(existing), str(tmp_path / "no-such.db"), "/etc/passwd", "/etc/no-such-file",
        "../outside.db", "../no-such.db", str(settings.import_path / ".." / "outside.db"),
    )]
    assert all(a == {"result": False, "message": OUTSIDE_IMPORT_DIR} for a in answers), answers


def test_a_relative_path_resolves_in_the_import_folder_not_the_working_directory(settings, tmp_path,
                                                                                     monkeypatch):
    make_pool(tmp_path / "cwd.db", "manuals", topics_of(1))
    monkeypatch.chdir(tmp_path)
    outcome = confined(settings, "cwd.db")
    assert outcome["result"] is False and "not found" in outcome["message"]
    assert str(tmp_path) not in outcome["message"]


def test_a_symlink_out_of_the_import_folder_is_outside(settings, tmp_path):
    real = make_pool(tmp_path / "real.db", "manuals", topics_of(1))
    os.symlink(real, settings.import_path / "link.db")
    assert confined(settings, "link.db") == {"result": False, "message": OUTSIDE_IMPORT_DIR}


def test_a_view_standing_in_for_a_pool_table_is_refused(settings, tmp_path):
    source = make_pool(settings.import_path / "view.db", "manuals", topics_of(2))
    with sqlite3.connect(source) as con:
        con.execute('alter table "doc$topic" rename to "stash_topic"')
        con.execute('create view "doc$topic" as select * from "stash_topic"')
    target = tmp_path / "sales.db"
    before = file_digest(target) if target.exists() else None
    outcome = confined(settings, "view.db")
    assert outcome["result"] is False and "view" in outcome["message"]
    assert (file_digest(target) if target.exists() else None) == before


@pytest.mark.parametrize("kind", ["virtual", "stored"])
def test_a_generated_column_in_a_pool_table_is_refused(settings, tmp_path, kind):
    """Generated values are made as they are read, like a view's: a tiny source could make
    gigabytes of body text. The pool schema has none, so a source with one is not a pool."""
    source = make_pool(settings.import_path / "gen.db", "manuals", topics_of(2))
    with sqlite3.connect(source) as con:
        con.execute('alter table "doc$topic" rename to "stash_topic"')
        con.execute(f"""create table "doc$topic"(id integer primary key, collection text, slug text, title text,
                        breadcrumb text, category text, description text, source_uri text, mime text, mtime text,
                        seed text, body_md text generated always as (printf('%.*c', 1000, 'x')) {kind})""")
    target = tmp_path / "sales.db"
    before = file_digest(target) if target.exists() else None
    outcome = confined(settings, "gen.db")
    assert outcome["result"] is False
    assert outcome["message"].endswith("has doc$topic.body_md as a generated column, the pool schema needs stored values")
    assert (file_digest(target) if target.exists() else None) == before


@pytest.mark.parametrize("where", ["topic", "chunk"])
def test_a_text_over_the_limit_is_refused_and_one_at_it_imported(settings, tmp_path, monkeypatch, where):
    from knowspec.impl.docpool import importdoc

    monkeypatch.setattr(importdoc, "TEXT_CAPS", tuple(
        (what, rows, {c: (100 if c in ("body_md", "body") else cap) for c, cap in caps.items()})
        for what, rows, caps in importdoc.TEXT_CAPS))
    for size, imported in ((100, True), (101, False)):
        source = make_pool(settings.import_path / f"big{size}.db", "manuals", [("s", "T", "b" * size)],
                           chunks_per_topic=1)
        with sqlite3.connect(source) as con:  # the one text at the size, the other short
            if where == "chunk":
                con.execute("update \"doc$chunk\" set body = ?", ["c" * size])
                con.execute("update \"doc$topic\" set body_md = 'short'")
            else:
                con.execute("update \"doc$chunk\" set body = 'short'")
        outcome = confined(settings, f"big{size}.db")
        assert outcome["result"] is imported, outcome
        if not imported:
            what = "a topic whose body_md" if where == "topic" else "a chunk whose body"
            assert outcome["message"] == f"source holds {what} is over 100 bytes in collection manuals"


def _refused_untouched(settings, tmp_path, name: str, collection: str = "manuals") -> str:
    target = tmp_path / "sales.db"
    before = file_digest(target) if target.exists() else None
    outcome = confined(settings, name, collection)
    assert outcome["result"] is False
    assert (file_digest(target) if target.exists() else None) == before
    return outcome["message"]


@pytest.mark.parametrize(("column", "size", "shown"), [("body_md", (16 << 20) + 1, "body_md is over 16 MiB"),
                                                       ("title", (64 << 10) + 1, "title is over 64 KiB"),
                                                       ("description", (1 << 20) + 1, "description is over 1 MiB")])
def test_a_text_after_a_nul_is_measured_in_bytes(settings, tmp_path, column, size, shown):
    """SQLite's length() of a text stops at its first NUL: a 40 MiB body after one imported."""
    source = make_pool(settings.import_path / f"nul-{column}.db", "manuals", topics_of(1))
    with sqlite3.connect(source) as con:
        con.execute(f'update "doc$topic" set {column} = ?', ["\x00" + "x" * (size - 1)])
    assert _refused_untouched(settings, tmp_path, f"nul-{column}.db") == \
        f"source holds a topic whose {shown} in collection manuals"


def test_a_recipe_table_that_is_virtual_is_refused(settings, tmp_path):
    """FTS5 with external content over a view made 80 MB of titles from a 151 KB source."""
    source = make_pool(settings.import_path / "vtab.db", "manuals", topics_of(1))
    with sqlite3.connect(source) as con:
        con.execute('alter table "doc$topic" rename to "plain_topic"')
        con.execute('create view "made" as select id, collection, slug, printf(\'%.*c\', 5000, \'T\') as title, '
                    "breadcrumb, category, description, source_uri, mime, mtime, body_md from plain_topic")
        con.execute('create virtual table "doc$topic" using fts5(id, collection, slug, title, breadcrumb, category, '
                    "description, source_uri, mime, mtime, body_md, content='made')")
    assert _refused_untouched(settings, tmp_path, "vtab.db").endswith(
        "has doc$topic as a virtual table, the pool schema needs stored values")


def test_a_source_repeating_topic_ids_is_refused(settings, tmp_path):
    """500 topics with id 1 and 500 chunks of topic 1 (622 KB) had written 250,000 chunks."""
    source = make_pool(settings.import_path / "amp.db", "manuals", topics_of(1))
    with sqlite3.connect(source) as con:
        con.execute('create table t2 as select * from "doc$topic"')
        con.execute('drop table "doc$topic"')
        con.execute('create table "doc$topic" as select * from t2')  # no key
        con.execute('insert into "doc$topic" select id, collection, slug || \'-2\', title, breadcrumb, category, '
                    "description, source_uri, mime, mtime, body_md from t2")
    assert _refused_untouched(settings, tmp_path, "amp.db").endswith("repeats doc$topic.id, a key of the pool schema")


@pytest.mark.parametrize(("edit", "said"), [
    ('create table t2 as select * from "doc$topic"; drop table "doc$topic"; create table "doc$topic" as select * '
     'from t2; insert into "doc$topic" select id + 100, collection, slug, title, breadcrumb, category, description, '
     'source_uri, mime, mtime, body_md from t2', "repeats a slug in doc$topic, a key of the pool schema"),
    ('update "doc$topic" set title = cast(title as blob)', "holds a topic whose title is not text"),
    ('update "doc$chunk" set heading = x\'41\'', "holds a chunk whose heading is not text"),
    ("update \"doc$topic\" set title = cast(x'54ff' as text)", "holds a topic whose title is not UTF-8 text"),
    ("update \"doc$topic\" set description = cast(x'eda080' as text)",  # a UTF-16 surrogate
     "holds a topic whose description is not UTF-8 text"),
    ("update \"doc$chunk\" set body = cast(x'696e766f69636573ff' as text)", "holds a chunk whose body is not UTF-8 text"),
    ("update \"doc$link\" set key = cast(x'4bc3' as text)", "holds a link whose key is not UTF-8 text"),
    ("insert into \"doc$link\"(topic_id, kind, key, confidence, source) select id, 'form_class', 'k', 'high', '' "
     'from "doc$topic" limit 1', "holds a link whose confidence is not a finite number"),
    ("insert into \"doc$link\"(topic_id, kind, key, confidence, source) select id, 'form_class', 'k', 1e999, '' "
     'from "doc$topic" limit 1', "holds a link whose confidence is not a finite number"),
])
def test_a_source_whose_values_break_the_pool_schema_is_refused(settings, tmp_path, edit, said):
    """SQLite keeps any value in any column: such rows had broken every later read of the pool."""
    source = make_pool(settings.import_path / "odd.db", "manuals", topics_of(2))
    with sqlite3.connect(source) as con:
        con.executescript(edit)
    assert said in _refused_untouched(settings, tmp_path, "odd.db")


def test_texts_in_any_script_are_imported(settings, tmp_path):
    make_pool(settings.import_path / "scripts.db", "manuals", [("s", "Straße — 日本語 😀", "ğüşiöç body")])
    assert confined(settings, "scripts.db")["result"] is True


def test_the_help_pools_collection_name_is_refused(settings, tmp_path):
    """Its hits had come back labelled as the help pool's, its doc_get read the help topic."""
    make_pool(settings.import_path / "help-named.db", "netsim-help", topics_of(1))
    assert _refused_untouched(settings, tmp_path, "help-named.db", "netsim-help").startswith(
        "collection netsim-help is the help")


def test_a_source_without_its_chunk_table_is_not_a_pool(settings):
    source = make_pool(settings.import_path / "nochunks.db", "manuals", topics_of(2))
    with sqlite3.connect(source) as con:
        con.execute('drop table "doc$chunk"')
    outcome = confined(settings, "nochunks.db")
    assert outcome == {"result": False,
                       "message": "source is not a document pool: nochunks.db in the import folder (no such table: doc$chunk)"}


def test_a_corrupt_source_is_a_storage_error_retryable_as_errors_toml_says(settings):
    source = make_pool(settings.import_path / "broken.db", "manuals", topics_of(2))
    with sqlite3.connect(source) as con:
        con.execute('drop table "doc$chunk_vec"')
    with pytest.raises(ToolError) as err:
        confined(settings, "broken.db")
    assert err.value.code == "storage_error"
    assert err.value.retryable is default_retryable("storage_error") is True


def test_the_command_line_import_is_not_confined(settings, tmp_path):
    source = make_pool(tmp_path / "anywhere.db", "manuals", topics_of(1))
    assert import_collection(settings, "sales", "manuals", str(source))["result"] is True

"""PostgreSQL's and Firebird's IMPORTDOC hold one copy of a collection, and only as long as they
need it: the source's vectors are streamed from one read snapshot as they are written,
``target_rows`` moves the source's rows (the source's lists are emptied), and once they are
written ``written()`` keeps only what the index build reads (chunk texts, topic slugs), letting
go of bodies and the rest before the build's own peak."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from dataclasses import fields

import pytest

from knowspec.impl.docpool.storage import _source
from storages import SAMPLE_COLLECTION, build_sources


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return build_sources(tmp_path_factory.mktemp("import-rows"))[SAMPLE_COLLECTION]


def lists_of(rows) -> dict[str, list]:
    return {f.name: getattr(rows, f.name) for f in fields(rows) if isinstance(getattr(rows, f.name), list)}


def test_target_rows_move_the_rows_out_of_the_source(source):
    with _source.collection_rows(source, SAMPLE_COLLECTION) as src:
        held = {name: len(rows) for name, rows in lists_of(src).items()}
        vectors = len(list(src.chunk_vecs))
        assert held["topics"] and held["chunks"] and vectors
        rows = _source.target_rows(src, next_topic_id=10, next_chunk_id=100, next_entity_id=1)
        assert all(not rows for rows in lists_of(src).values())
        assert (len(rows.topics), len(rows.chunks)) == (held["topics"], held["chunks"])
        assert len(list(rows.chunk_vecs)) == vectors


def test_vectors_streamed_during_an_import_are_the_source_as_the_import_began(source, tmp_path):
    copy = tmp_path / "source.db"
    shutil.copyfile(source, copy)
    with _source.collection_rows(copy, SAMPLE_COLLECTION) as src:
        first = src.chunk_vecs.first()
        with closing(sqlite3.connect(copy, timeout=0)) as writer:
            try:  # a writer is either kept out while the import reads, or not seen by it
                writer.execute('delete from "doc$chunk_vec"')
                writer.commit()
            except sqlite3.OperationalError as exc:
                assert "locked" in str(exc)
        rows = list(src.chunk_vecs)
    assert first is not None and rows and rows[0] == first


def test_written_rows_keep_only_what_the_index_build_reads(source):
    with _source.collection_rows(source, SAMPLE_COLLECTION) as src:
        rows = _source.target_rows(src, next_topic_id=10, next_chunk_id=100, next_entity_id=1)
    chunks = [(c[0], c[1], c[3], c[4], c[5]) for c in rows.chunks]
    topics = [t[:3] for t in rows.topics]
    written = rows.written()
    assert (written.chunks, written.topics) == (chunks, topics)
    assert (written.first_topic_id, written.first_chunk_id) == (10, 100)
    assert all(not rows for rows in lists_of(rows).values())


def test_the_index_of_written_rows_is_the_index_of_every_row(source):
    with _source.collection_rows(source, SAMPLE_COLLECTION) as src:
        rows = _source.target_rows(src, next_topic_id=1, next_chunk_id=1, next_entity_id=1)
    every_chunk = [(c[0], c[1], c[3], c[4], c[5]) for c in rows.chunks]
    every_topic = [t[:3] for t in rows.topics]
    nothing_below = lambda bound: []  # noqa: E731 (no other collection in the pool)
    from_memory = _source.pool_index(("s",), nothing_below, nothing_below, rows.written())
    read_back = _source.pool_index(("s",), lambda bound: every_chunk, lambda bound: every_topic)
    assert from_memory.arrays.terms == read_back.arrays.terms
    assert from_memory.arrays.post_tf.tolist() == read_back.arrays.post_tf.tolist()
    assert list(from_memory.texts) == list(read_back.texts)

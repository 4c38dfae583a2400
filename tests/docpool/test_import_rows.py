"""PostgreSQL's and Firebird's IMPORTDOC hold one copy of a collection, and only as long as they
need it: ``target_rows`` moves the source's rows (the source's lists are emptied), and once
they are written ``written()`` keeps only what the index build reads (chunk texts, topic slugs),
letting go of bodies, vectors and the rest before the build's own peak."""

from __future__ import annotations

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
    src = _source.read_collection(source, SAMPLE_COLLECTION)
    held = {name: len(rows) for name, rows in lists_of(src).items()}
    assert held["topics"] and held["chunks"] and held["chunk_vecs"]
    rows = _source.target_rows(src, next_topic_id=10, next_chunk_id=100, next_entity_id=1)
    assert all(not rows for rows in lists_of(src).values())
    assert (len(rows.topics), len(rows.chunks), len(rows.chunk_vecs)) == (held["topics"], held["chunks"],
                                                                         held["chunk_vecs"])


def test_written_rows_keep_only_what_the_index_build_reads(source):
    rows = _source.target_rows(_source.read_collection(source, SAMPLE_COLLECTION),
                               next_topic_id=10, next_chunk_id=100, next_entity_id=1)
    chunks = [(c[0], c[1], c[3], c[4], c[5]) for c in rows.chunks]
    topics = [t[:3] for t in rows.topics]
    written = rows.written()
    assert (written.chunks, written.topics) == (chunks, topics)
    assert (written.first_topic_id, written.first_chunk_id) == (10, 100)
    assert all(not rows for rows in lists_of(rows).values())


def test_the_index_of_written_rows_is_the_index_of_every_row(source):
    rows = _source.target_rows(_source.read_collection(source, SAMPLE_COLLECTION),
                               next_topic_id=1, next_chunk_id=1, next_entity_id=1)
    every_chunk = [(c[0], c[1], c[3], c[4], c[5]) for c in rows.chunks]
    every_topic = [t[:3] for t in rows.topics]
    nothing_below = lambda bound: []  # noqa: E731 (no other collection in the pool)
    from_memory = _source.pool_index(("s",), nothing_below, nothing_below, rows.written())
    read_back = _source.pool_index(("s",), lambda bound: every_chunk, lambda bound: every_topic)
    assert from_memory.arrays.terms == read_back.arrays.terms
    assert from_memory.arrays.post_tf.tolist() == read_back.arrays.post_tf.tolist()
    assert list(from_memory.texts) == list(read_back.texts)

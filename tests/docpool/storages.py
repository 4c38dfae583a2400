"""Real engines for the storage tests (not a test module): PostgreSQL, embedded Firebird, pools.

- ``pg_dsn`` (session fixture): ``KNOWSPEC_TEST_PG_DSN`` when set (its ``ivd$docs`` schema is
  dropped first: use a throwaway database), else a throwaway PostgreSQL cluster made with
  ``initdb`` / ``pg_ctl`` in a temporary folder, listening on a unix socket only, removed at the
  end (``benchmarks/engines.py``, shared with the benchmarks). Skips loudly when the PostgreSQL
  binaries are absent.
- ``fb_ready`` (session fixture) loads the embedded Firebird engine or skips loudly; ``fb_dsn``
  names a pool: an embedded database file under tmp, or ``KNOWSPEC_TEST_FB_DSN`` + name when that
  server prefix is set (e.g. ``localhost:/var/lib/firebird/data/``).
- ``build_sources``: the sample help corpus (``examples/help``) and a generated corpus of
  Turkish and accented text, built with ``builder.build_pool``, with synthetic vectors.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import struct
import sys
import threading
import time
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from knowspec.impl.docpool import recipe
from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.storage.base import UNRESTRICTED

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import engines  # noqa: E402  (the throwaway PostgreSQL cluster, shared with the benchmarks)
from engines import fresh_pg_database  # noqa: E402,F401  (re-exported for the storage tests)
SAMPLE = REPO / "examples" / "help"
SAMPLE_COLLECTION = "ic-belgeler"
GENERATED_COLLECTION = "uretilen"
VECTOR_DIM = 16

WORDS = ("istanbul boğazı köprü köprüler ışık ıslak sokak straße café crème zürich naïve œuvre smørrebrød "
         "łódź çay şeker güneş ağaç İzmir IŞIK Ödeme fatura bordro kesim tarihi déjà über Ärger İşlem "
         "kodu müşteri tedarikçi ünvan vergi numarası iletişim bilgileri kartı açmak için menü rapor "
         "yazdır düğme gönder alıcı mükellef Çalışan izin günü resmî tatil çizelge Şube depo").split()
PUNCT = [" ", " ", " ", ", ", ". ", ": ", "; ", "\n",
         "/", "-", "_", "://", "@", "."]  # glue words the way URLs, paths and e-mail do


def unavailable(reason: str):
    """Skip loudly on a developer's machine; in CI (CI=true) a missing engine is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must install it: .ci/run calls scripts/ci-services)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_dsn():
    import psycopg

    env = os.environ.get("KNOWSPEC_TEST_PG_DSN")
    if env:
        with psycopg.connect(env, autocommit=True) as con:
            con.execute('drop schema if exists "ivd$docs" cascade')
        yield env
        return
    cluster = engines.PgCluster()
    if not cluster.available:
        unavailable("PostgreSQL binaries (initdb, pg_ctl) are absent: run scripts/ci-services "
                    "or set KNOWSPEC_TEST_PG_DSN -- PostgreSQL storage NOT TESTED")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def fb_ready():
    try:
        from knowspec.impl.docpool.storage import firebird

        firebird.load_engine()
    except Exception as exc:  # wheel or libtommath1 missing
        unavailable(f"embedded Firebird is not loadable ({exc}): run scripts/ci-services -- "
                    "Firebird storage NOT TESTED")
    return True


def fb_dsn(folder: Path, name: str) -> str:
    """A Firebird pool DSN: ``KNOWSPEC_TEST_FB_DSN`` + name when set (a server prefix such as
    ``localhost:/var/fb/``), else an embedded database file under ``folder``."""
    prefix = os.environ.get("KNOWSPEC_TEST_FB_DSN")
    return f"{prefix}{name}.fdb" if prefix else str(folder / f"{name}.fdb")


# -- source pools ---------------------------------------------------------------------------------

def _sentence(r: random.Random, n: int) -> str:
    return "".join(r.choice(WORDS) + r.choice(PUNCT) for _ in range(n)).strip()


def write_generated_corpus(folder: Path, seed: int = 7, topics: int = 40) -> None:
    """Markdown topics of Turkish and accented words, with sections, links and ACLs."""
    r = random.Random(seed)
    (folder / "topics").mkdir(parents=True)
    for i in range(topics):
        sections = "\n\n".join(f"## {_sentence(r, r.randint(1, 3))}\n\n{_sentence(r, r.randint(5, 80))}"
                               for _ in range(r.randint(1, 3)))
        acl = "acl: [muhasebe]\n" if i % 5 == 0 else ""
        form = f"form_class: TfrmUretilen{i % 7}\n"
        (folder / "topics" / f"t{i:03d}.md").write_text(
            f"---\nslug: konu-{i:03d}\ntitle: {json.dumps(_sentence(r, r.randint(1, 4)))}\n"
            f"breadcrumb: {json.dumps(f'Üretilen > {i}')}\n"
            f"{acl}{form}---\n# Başlık {i}\n\n{_sentence(r, r.randint(3, 40))}\n\n{sections}\n", "utf-8")


def add_vectors(pool: Path, seed: int) -> None:
    """Synthetic L2-normalised float32 vectors for every topic and chunk (no model needed)."""
    r = random.Random(seed)

    def vec() -> bytes:
        v = [r.gauss(0, 1) for _ in range(VECTOR_DIM)]
        n = sum(x * x for x in v) ** 0.5
        return struct.pack(f"<{VECTOR_DIM}f", *(x / n for x in v))

    with closing(sqlite3.connect(pool)) as con:
        con.executemany('insert into "doc$topic_vec"(topic_id, vec) values (?, ?)',
                        [(t, vec()) for (t,) in con.execute('select id from "doc$topic" order by id').fetchall()])
        con.executemany('insert into "doc$chunk_vec"(chunk_id, vec) values (?, ?)',
                        [(c, vec()) for (c,) in con.execute('select id from "doc$chunk" order by id').fetchall()])
        con.commit()


def build_sources(root: Path) -> dict[str, Path]:
    """Source pools: collection -> file (sample corpus restricted, generated corpus public)."""
    src = root / "sources"
    src.mkdir(parents=True, exist_ok=True)
    sample = src / "sample.db"
    build_pool(SAMPLE, sample, SAMPLE_COLLECTION, title="İç belgeler", erisim="kisitli")
    add_vectors(sample, 1)
    corpus = root / "generated-corpus"
    write_generated_corpus(corpus)
    generated = src / "generated.db"
    build_pool(corpus, generated, GENERATED_COLLECTION, title="Üretilen", erisim="herkes")
    add_vectors(generated, 2)
    return {SAMPLE_COLLECTION: sample, GENERATED_COLLECTION: generated}


def query_words(seed: int, n: int) -> list[str]:
    """``n`` generated queries: 1-3 words from the corpus vocabulary, some cut to prefixes."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        words = [r.choice(WORDS) for _ in range(r.randint(1, 3))]
        out.append(" ".join(w[: r.randint(2, len(w))] if r.random() < 0.4 else w for w in words))
    return out


def build_versions(root: Path) -> tuple[Path, Path]:
    """Two versions of the generated collection (different topics and sizes), for imports."""
    out = []
    for version, (seed, topics) in enumerate(((7, 40), (8, 25)), 1):
        corpus = root / f"corpus-v{version}"
        write_generated_corpus(corpus, seed=seed, topics=topics)
        pool = root / f"generated-v{version}.db"
        build_pool(corpus, pool, GENERATED_COLLECTION, title=f"Üretilen v{version}", erisim="herkes")
        add_vectors(pool, version)
        out.append(pool)
    return out[0], out[1]


def observe(pool) -> tuple:
    """What a reader sees of a pool in one request: counts, topics, recipe, a search, a topic."""
    from knowspec.impl.docpool.search import fts_ranked
    from knowspec.impl.docpool.storage.base import UNRESTRICTED

    hits = fts_ranked(pool, "köprü", UNRESTRICTED, limit=50)
    return (pool.counts(UNRESTRICTED), pool.collection_counts(UNRESTRICTED),
            [c.title for c in pool.collections(UNRESTRICTED)],
            len(pool.topic_ids(UNRESTRICTED)), [(h.slug, h.score) for h in hits],
            len(pool.vectors("chunk", UNRESTRICTED)))


# -- import atomicity, the same three scenarios for every storage module ------------------------
def at_insert(storage, monkeypatch, table: str, *, before=lambda: None, after=lambda: None) -> None:
    """Break the storage's insert seam at ``table``: ``before`` runs just before its rows are
    written, ``after`` just after."""
    real = storage._insert

    def patched(cur, name, sql, rows):
        if name == table:
            before()
        real(cur, name, sql, rows)
        if name == table:
            after()

    monkeypatch.setattr(storage, "_insert", patched)


@contextmanager
def pool_left_alone(open_pool, dsn):
    """The block leaves the pool's content and change stamp as they were."""
    with open_pool(dsn) as pool:
        before, stamp = observe(pool), pool.change_stamp()
    yield
    with open_pool(dsn) as pool:
        assert observe(pool) == before
        assert pool.change_stamp() == stamp


def check_failing_import_changes_nothing(storage, open_pool, dsn, versions, monkeypatch) -> None:
    """An import that fails after writing most tables leaves the pool and its change stamp alone."""
    v1, v2 = versions
    storage.import_collection(dsn, v1, GENERATED_COLLECTION)

    def fail() -> None:  # topics, chunks, links, ACLs and topic vectors are written by now
        raise RuntimeError("injected failure")

    at_insert(storage, monkeypatch, "chunk_vecs", after=fail)
    with pool_left_alone(open_pool, dsn), pytest.raises(storage.ImportFailed, match="^injected failure$"):
        storage.import_collection(dsn, v2, GENERATED_COLLECTION)


def check_reader_keeps_its_snapshot(storage, open_pool, dsn, versions) -> None:
    v1, v2 = versions
    storage.import_collection(dsn, v1, GENERATED_COLLECTION)
    with open_pool(dsn) as old_reader:
        before = observe(old_reader)
        storage.import_collection(dsn, v2, GENERATED_COLLECTION)
        assert observe(old_reader) == before  # old, never a mix
        with open_pool(dsn) as new_reader:
            after = observe(new_reader)
    assert after != before


def check_concurrent_readers_see_old_or_new(storage, open_pool, dsn, versions, rounds: int = 2) -> None:
    v1, v2 = versions
    storage.import_collection(dsn, v1, GENERATED_COLLECTION)
    with open_pool(dsn) as pool:
        old = observe(pool)
    storage.import_collection(dsn, v2, GENERATED_COLLECTION)
    with open_pool(dsn) as pool:
        new = observe(pool)
    seen, stop, errors = [], threading.Event(), []

    def read():
        try:
            while not stop.is_set():
                with open_pool(dsn) as pool:
                    seen.append(observe(pool))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for source in (v1, v2) * rounds:
            storage.import_collection(dsn, source, GENERATED_COLLECTION)
    finally:
        stop.set()
        reader.join()
    assert not errors
    assert seen and all(s in (old, new) for s in seen)


def check_import_reports_like_the_recipe(storage, open_pool, dsn, versions, reference: Path) -> None:
    """IMPORTDOC answers what the SQLite recipe answers, and the next read sees the new rows."""
    v1, v2 = versions
    want = recipe.import_collection(reference, v1, GENERATED_COLLECTION)
    assert storage.import_collection(dsn, v1, GENERATED_COLLECTION) == want
    with open_pool(dsn) as pool:
        first = observe(pool)
    second = storage.import_collection(dsn, v2, GENERATED_COLLECTION)
    assert second.topics < want.topics
    with open_pool(dsn) as pool:
        assert observe(pool) != first
        assert pool.counts(UNRESTRICTED)["topic"] == second.topics
        assert pool.collection_counts(UNRESTRICTED)[GENERATED_COLLECTION] == {"topic": second.topics,
                                                                             "chunk": second.chunks}


def renamed_collection(source: Path, copy: Path, collection: str) -> Path:
    """A copy of the pool ``source`` whose collection is called ``collection``."""
    import shutil

    shutil.copy(source, copy)
    with closing(sqlite3.connect(copy)) as con:
        con.execute("pragma foreign_keys = off")
        for table in ('"doc$collection" set id', '"doc$topic" set collection', '"doc$entity" set collection',
                      '"doc$entity_kind" set collection', '"doc$entity_rel" set collection', '"doc$alias" set collection'):
            con.execute(f"update {table} = ?", [collection])
        con.execute('update "doc$meta" set collection = ? where collection <> \'\'', [collection])
        con.commit()
    return copy


def check_removal_like_the_recipe(storage, open_pool, dsn, versions, folder: Path) -> None:
    """Removing one of two collections leaves the pool a reader sees as the SQLite recipe's (the
    other collection's rows, search and vectors, the general recipe kept), and a collection the
    pool does not hold is refused with the pool untouched."""
    v1, v2 = versions
    other = renamed_collection(v2, folder / "other.db", "other")
    reference = folder / "ref.db"
    for target, importer in ((reference, recipe.import_collection), (dsn, storage.import_collection)):
        importer(target, v1, GENERATED_COLLECTION)
        importer(target, other, "other")
    want = recipe.remove_collection(reference, GENERATED_COLLECTION)
    assert storage.remove_collection(dsn, GENERATED_COLLECTION) == want and want.topics > 0
    from knowspec.impl.docpool.storage.sqlite import SqlitePool

    with open_pool(dsn) as pool, SqlitePool(reference) as ref:
        seen, stamp, meta = observe(pool), pool.change_stamp(), pool.meta()
        assert observe(ref) == seen and seen[0]["topic"] > 0
        assert [c.id for c in ref.collections(UNRESTRICTED)] == ["other"]
        assert meta == ref.meta() and meta[""]["search_bm25_weights"] and GENERATED_COLLECTION not in meta
    with pytest.raises(recipe.ImportRefused, match="collection nowhere is not in the pool"):
        storage.remove_collection(dsn, "nowhere")
    with open_pool(dsn) as pool:
        assert pool.change_stamp() == stamp and observe(pool) == seen


def check_another_models_vectors_are_refused(storage, open_pool, dsn, versions, folder: Path) -> None:
    """A collection whose vectors have another dimension is refused as the recipe refuses it, the
    pool untouched: PostgreSQL and Firebird had imported it, and vector search of every collection
    failed until it was imported again."""
    import shutil

    v1, v2 = versions
    storage.import_collection(dsn, v1, GENERATED_COLLECTION)
    reference = folder / "ref.db"
    recipe.import_collection(reference, v1, GENERATED_COLLECTION)
    other = folder / "other-dim.db"
    shutil.copy(v2, other)
    with closing(sqlite3.connect(other)) as con:
        con.execute("pragma foreign_keys = off")
        for table in ('"doc$collection" set id', '"doc$topic" set collection'):
            con.execute(f"update {table} = 'other'")
        con.execute('update "doc$meta" set collection = \'other\' where collection <> \'\'')
        for table in ("doc$topic_vec", "doc$chunk_vec"):
            con.execute(f'update "{table}" set vec = substr(vec, 1, 32)')  # 8 dimensions
        con.execute("delete from \"doc$meta\" where collection = '' and name in ('vec_model', 'vec_dim')")
        con.commit()
    with pytest.raises(recipe.ImportRefused) as want:
        recipe.import_collection(reference, other, "other")
    with pool_left_alone(open_pool, dsn), pytest.raises(recipe.ImportRefused) as got:
        storage.import_collection(dsn, other, "other")
    assert str(got.value) == str(want.value) and "dimension" in str(got.value)


def check_a_source_written_over_mid_import_changes_nothing(storage, open_pool, dsn, versions, folder: Path,
                                                           monkeypatch) -> None:
    """A copy onto the source file while an import reads it (no SQLite lock keeps that out) fails
    the import, the pool untouched: its texts had been the old file's and its vectors the new one's."""
    import shutil

    v1, v2 = versions
    storage.import_collection(dsn, v1, GENERATED_COLLECTION)
    source, zeroed = folder / "source.db", folder / "zeroed.db"
    shutil.copy(v1, source)
    shutil.copy(v1, zeroed)
    with closing(sqlite3.connect(zeroed)) as con:  # the same pool, its vectors zeroed: a file of the same size
        con.execute('update "doc$chunk_vec" set vec = zeroblob(length(vec))')
        con.commit()
    # the texts are read already, the vectors not yet
    at_insert(storage, monkeypatch, "chunk_vecs", before=lambda: shutil.copyfile(zeroed, source))
    with (pool_left_alone(open_pool, dsn),
          pytest.raises(storage.ImportFailed, match="changed while it was being imported")):
        storage.import_collection(dsn, source, GENERATED_COLLECTION)


def imports_at_once(storage, dsn, pairs, meanwhile=lambda: None) -> list[BaseException]:
    """``storage.import_collection(dsn, source, collection)`` for each ``(source, collection)``
    on a thread of its own, all started together; ``meanwhile`` runs once they are. The failures."""
    failures: list[BaseException] = []

    def run(source: Path, collection: str) -> None:
        try:
            storage.import_collection(dsn, source, collection)
        except BaseException as exc:  # reported to the caller
            failures.append(exc)

    threads = [threading.Thread(target=run, args=pair) for pair in pairs]
    for thread in threads:
        thread.start()
    meanwhile()
    for thread in threads:
        thread.join(120)
    return failures


def check_two_imports_at_once_both_land(storage, open_pool, dsn, versions, sample_source: Path,
                                        hold_stamp) -> None:
    """Two imports started while a third transaction holds the pool's stamp both land once it
    lets go, one after the other: Firebird had failed the second with "deadlock" (its snapshot
    predated the first's commit). ``hold_stamp(dsn)`` takes the stamp's row and returns its
    release."""
    v1, v2 = versions
    storage.import_collection(dsn, v1, GENERATED_COLLECTION)
    release = hold_stamp(dsn)

    def let_go() -> None:
        time.sleep(0.5)  # both wait on the held row
        release()

    assert imports_at_once(storage, dsn, [(sample_source, SAMPLE_COLLECTION), (v2, GENERATED_COLLECTION)],
                           meanwhile=let_go) == []
    with open_pool(dsn) as pool:
        got = {c.id: c.topics for c in pool.collections(UNRESTRICTED)}
    with closing(sqlite3.connect(v2)) as con:
        v2_topics = con.execute('select count(*) from "doc$topic"').fetchone()[0]
    assert set(got) == {SAMPLE_COLLECTION, GENERATED_COLLECTION} and got[GENERATED_COLLECTION] == v2_topics


def check_unloadable_vectors_are_refused(storage, dsn, versions, folder: Path) -> None:
    """A collection whose vectors do not all load as one matrix (two sizes, a value that is no
    BLOB, a size of no whole float32s) is refused as the recipe refuses it: imported, it had broken
    vector search of the whole pool (every storage, SQLite's recipe included)."""
    import shutil

    v1, _ = versions
    faults = {
        "two sizes": 'update "doc$chunk_vec" set vec = substr(vec, 1, 32) where chunk_id % 2 = 0',
        "text": 'update "doc$chunk_vec" set vec = \'x\' where chunk_id = (select min(chunk_id) from "doc$chunk_vec")',
        "odd size": 'update "doc$chunk_vec" set vec = substr(vec, 1, 7); update "doc$topic_vec" set vec = substr(vec, 1, 7)',
    }
    for name, sql in faults.items():
        source = folder / f"vectors-{name.replace(' ', '-')}.db"
        shutil.copy(v1, source)
        with closing(sqlite3.connect(source)) as con:
            con.executescript(sql)
        with pytest.raises(recipe.ImportRefused) as want:
            recipe.import_collection(folder / f"ref-{name.replace(' ', '-')}.db", source, GENERATED_COLLECTION)
        with pytest.raises(recipe.ImportRefused) as got:
            storage.import_collection(dsn, source, GENERATED_COLLECTION)
        assert str(got.value) == str(want.value) and "vectors cannot be loaded" in str(got.value), name


def check_refusals_match_the_recipe(storage, dsn, source: Path, collection: str, reference: Path) -> None:
    """A refused IMPORTDOC says exactly what the SQLite recipe says."""
    with pytest.raises(recipe.ImportRefused) as want:
        recipe.import_collection(reference, source, collection)
    with pytest.raises(recipe.ImportRefused) as got:
        storage.import_collection(dsn, source, collection)
    assert str(got.value) == str(want.value)

"""Shared setup for the doc-pool benchmarks (not a benchmark itself): pools, an appdir with a
catalog and a document pool, labelled query sets, retrieval metrics and an embedding cache.

Everything expensive is cached under ``KNOWSPEC_BENCH_CACHE`` (default ``/tmp/knowspec-bench``):
built source pools and passage vectors, so a second run measures the server, not the setup.
Running it (``knowspec bench docpool-setup``) fills the pool cache ahead of time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from knowspec.impl.config import Settings  # noqa: E402
from knowspec.impl.docpool import catalog, importdoc  # noqa: E402
from knowspec.impl.docpool.builder import build_pool  # noqa: E402
from knowspec.impl.docpool.storage.base import UNRESTRICTED  # noqa: E402
from knowspec.impl.docpool.storage.sqlite import SqlitePool  # noqa: E402
from knowspec.impl.docpool.vectors.scoring import PoolVectors  # noqa: E402
from common import databricks_path, require_bundle  # noqa: E402

DATABRICKS = databricks_path()  # $KNOWSPEC_CORPUS_DIR/databricks-okf; checked where it is read
SAMPLE = ROOT / "examples" / "help"
QUERIES = Path(__file__).parent / "queries"
CACHE = Path(os.environ.get("KNOWSPEC_BENCH_CACHE", "/tmp/knowspec-bench"))
LATENCY_POOL = CACHE / "vector-run" / "latency" / "bench-docs.db"  # docpool_vector.py's 100k-chunk pool
DATABASE = "bench"


def default_model_dir() -> Path:
    cache = os.environ.get("KNOWSPEC_MODEL_CACHE")
    for candidate in ([Path(cache) / "e5-int8"] if cache else []) + [Path("/tmp/vecpack/cache/e5-int8")]:
        if (candidate / "pack.json").is_file():
            return candidate
    raise SystemExit("no model pack: set KNOWSPEC_MODEL_CACHE or run `knowspec model build --out DIR`")


def machine_load() -> dict[str, float]:
    """The 1/5/15-minute load averages: the machine is shared, so timings depend on them."""
    one, five, fifteen = os.getloadavg()
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2)}


def load_queries(name: str) -> dict[str, Any]:
    return json.loads((QUERIES / f"{name}.json").read_text("utf-8"))


def labelled_query_texts() -> list[str]:
    """Every labelled query's text: the databricks set, then the sample help set."""
    return [q["query"] for name in ("databricks", "sample_help") for q in load_queries(name)["queries"]]


def require_latency_pool(benchmark: str) -> Path:
    """The 100k-chunk pool ``docpool_vector.py`` builds (``LATENCY_POOL``); exits saying how to
    make it when it is absent."""
    if not LATENCY_POOL.is_file():
        raise SystemExit(f"{benchmark}: no latency pool at {LATENCY_POOL}: run `knowspec bench docpool-vector` first")
    return LATENCY_POOL


def pool_vectors(pool_file: Path) -> PoolVectors:
    """A pool's vectors as ``doc_search`` holds them (int8 sketches included), read from its file."""
    with SqlitePool(pool_file) as pool:
        return PoolVectors.from_streams(
            *((pool.vector_count(w, UNRESTRICTED), pool.iter_vectors(w, UNRESTRICTED)) for w in ("topic", "chunk")))


def cached_pool(name: str, source: Path, collection: str, **kwargs: Any) -> tuple[Path, dict[str, Any]]:
    """A source pool built once (``CACHE/<name>.db``), with its counts and build time."""
    out, info = CACHE / f"{name}.db", CACHE / f"{name}.json"
    if out.is_file() and info.is_file():
        return out, json.loads(info.read_text())
    source = require_bundle(source)
    CACHE.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    counts = build_pool(source, out, collection, title=collection, **kwargs)
    data = {"counts": counts, "build_s": round(time.perf_counter() - start, 2)}
    info.write_text(json.dumps(data))
    return out, data


def subset_bundle(slugs: Iterable[str], out: Path) -> Path:
    """An OKF bundle with only the named databricks concepts (for a pool small enough to embed)."""
    require_bundle(DATABRICKS)
    if out.exists():
        shutil.rmtree(out)
    (out / "concepts").mkdir(parents=True)
    for slug in sorted(set(slugs)):
        shutil.copy(DATABRICKS / "concepts" / f"{slug}.md", out / "concepts" / f"{slug}.md")
    return out


@dataclass
class Appdir:
    settings: Settings
    import_s: dict[str, float]

    def server_args(self) -> list[str]:
        s = self.settings
        return ["--appdir", str(s.appdir), "--catalog", str(s.catalog_path), "--database", DATABASE]


def make_appdir(root: Path, pools: dict[str, Path], *, help_db: Path | None = None,
                model_dir: Path | None = None) -> Appdir:
    """A fresh appdir: catalog with database ``bench`` (SQLite, SET DOCUMENTS INTERNAL), each
    ``{collection: source pool}`` imported through the IMPORTDOC command, optional help pool and pack."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    settings = Settings(appdir=root)
    settings.default_database = DATABASE
    catalog.register_database(settings.catalog_path, DATABASE, "SQLITE", str(root / "bench-docs.db"))
    catalog.execute_alter(settings.catalog_path, f"ALTER DATABASE {DATABASE} SET DOCUMENTS INTERNAL")
    times = {}
    for collection, source in pools.items():
        start = time.perf_counter()
        outcome = importdoc.import_collection(settings, DATABASE, collection, str(source))
        times[collection] = round(time.perf_counter() - start, 2)
        if not outcome["result"]:
            raise SystemExit(f"IMPORTDOC refused {collection}: {outcome['message']}")
    if help_db is not None:
        shutil.copy(help_db, settings.help_db_path)
    if model_dir is not None:
        settings.model_dir.parent.mkdir(parents=True, exist_ok=True)
        settings.model_dir.symlink_to(model_dir.absolute(), target_is_directory=True)
    return Appdir(settings, times)


# -- metrics ---------------------------------------------------------------------------------

def first_relevant_rank(ranked: list[str], relevant: set[str]) -> int | None:
    return next((i for i, slug in enumerate(ranked, 1) if slug in relevant), None)


def metrics(rows: list[tuple[list[str], set[str]]], k: int = 10) -> dict[str, float]:
    """recall@k (share of the labelled topics in the top k), success@k (any of them) and MRR."""
    if not rows:
        return {}
    recall = [len(set(r[:k]) & rel) / len(rel) for r, rel in rows]
    ranks = [first_relevant_rank(r[:k], rel) for r, rel in rows]
    return {"queries": len(rows), f"recall@{k}": round(float(np.mean(recall)), 3),
            f"success@{k}": round(float(np.mean([x is not None for x in ranks])), 3),
            "mrr": round(float(np.mean([1 / x if x else 0.0 for x in ranks])), 3)}


# -- embedding cache -------------------------------------------------------------------------

class CachedEmbedder:
    """``embed_passages`` through a disk cache keyed by the prefixed text (vectors reused across runs)."""

    def __init__(self, embedder, path: Path) -> None:
        self.inner, self.info, self.path = embedder, embedder.info, path
        self.store: dict[str, np.ndarray] = {}
        if path.is_file():
            with np.load(path) as data:
                self.store = {k: data[k] for k in data.files}
        self.computed, self.seconds = 0, 0.0

    def embed_passages(self, texts: list[str], prefix: str, batch_size: int = 1) -> np.ndarray:
        rows = []
        for text in texts:
            key = hashlib.sha1((prefix + text).encode()).hexdigest()
            if key not in self.store:
                start = time.perf_counter()
                self.store[key] = self.inner.embed_passages([text], prefix)[0]
                self.seconds += time.perf_counter() - start
                self.computed += 1
                if self.computed % 200 == 0:
                    self.save()
                    print(f"  {self.computed} passages embedded", file=sys.stderr, flush=True)
            rows.append(self.store[key])
        return np.stack(rows)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, **self.store)
        tmp.replace(self.path)


if __name__ == "__main__":
    # `knowspec bench docpool-setup`: fill the cache (the source pools) before timing anything.
    for name, source, collection in (("databricks", DATABRICKS, "databricks"), ("sample-plain", SAMPLE, "netsim-help")):
        path, info = cached_pool(name, source, collection)
        print(json.dumps({"pool": str(path), **info}))

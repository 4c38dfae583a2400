"""OKF read-side benchmark on a real corpus (issue: OKF read side, performance).

Run: .venv/bin/python benchmarks/okf_read.py [--bundle DIR]  (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)
Writes benchmarks/results/okf_read.json. Reports side by side: the floor (read every file +
libyaml frontmatter + pyromark parse), the cold list_concepts through the real stdio server, warm
p50s of search_concepts / get_neighbors / read_concept (client-side timing), and the server's peak
RSS on a bundle padded to just under 64 MiB.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pyromark
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, require_bundle, server_peak_rss_mib, stdio_session, timed, write_results  # noqa: E402

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def floor_seconds(bundle: Path) -> float:
    start = time.perf_counter()
    for root, dirs, files in os.walk(bundle):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.endswith(".md"):
                continue
            text = (Path(root) / name).read_bytes().decode("utf-8", "replace")
            body = text
            if text.startswith("---\n"):
                end = text.find("\n---", 4)
                if end > 0:
                    yaml.load(text[4:end], Loader=LOADER)
                    body = text[end + 4:]
            for _ in pyromark.events_with_range(body):
                pass
    return time.perf_counter() - start


def padded_copy(bundle: Path, target_bytes: int, workdir: Path) -> Path:
    """A copy of ``bundle`` padded with synthetic concepts to just under ``target_bytes``."""
    out = workdir / "padded"
    shutil.copytree(bundle, out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    files = sum(1 for p in out.rglob("*") if p.is_file())
    pad = out / "padding"
    pad.mkdir()
    i = 0
    chunk = ("Padding paragraph with words for indexing. " * 160)
    while size + len(chunk) + 200 < target_bytes and files < 9_990:
        text = f"---\ntype: Note\ntitle: Padding {i}\n---\n# Padding {i}\n\n{chunk}\n"
        (pad / f"pad-{i:05d}.md").write_text(text)
        size += len(text.encode())
        files += 1
        i += 1
    return out


async def server_run(bundle: Path, queries: list[str], ids: list[str]) -> dict:
    out: dict = {}
    async with stdio_session() as session:
        cold_ms, result = await timed(session, "list_concepts", {"bundle_path": str(bundle)})
        assert not result.is_error, result.structured_content
        concepts = result.structured_content["concepts"]
        out["concepts"] = len(concepts)
        out["cold_list_concepts_ms"] = round(cold_ms, 1)
        warm = [(await timed(session, "list_concepts", {"bundle_path": str(bundle)}))[0] for _ in range(5)]
        out["warm_list_concepts"] = percentiles(warm)
        ids = ids or [c["id"] for c in random.Random(7).sample(concepts, min(50, len(concepts)))]
        search = [(await timed(session, "search_concepts", {"bundle_path": str(bundle), "query": q}))[0] for q in queries]
        out["warm_search_concepts"] = percentiles(search)
        neigh = [(await timed(session, "get_neighbors", {"bundle_path": str(bundle), "concept_id": i}))[0] for i in ids]
        out["warm_get_neighbors"] = percentiles(neigh)
        read = [(await timed(session, "read_concept", {"bundle_path": str(bundle), "concept_id": i}))[0] for i in ids]
        out["warm_read_concept"] = percentiles(read)
        sections = [(await timed(session, "search_sections", {"bundle_path": str(bundle), "query": q}))[0] for q in queries[:20]]
        out["warm_search_sections"] = percentiles(sections)
    return out


async def rss_run(bundle: Path) -> dict:
    async with stdio_session() as session:
        ms, result = await timed(session, "list_concepts", {"bundle_path": str(bundle)})
        await timed(session, "search_concepts", {"bundle_path": str(bundle), "query": "padding"})
        return {"cold_list_concepts_ms": round(ms, 1), "is_error": result.is_error,
                "server_peak_rss_mib": server_peak_rss_mib()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--skip-rss", action="store_true")
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    floor = min(floor_seconds(bundle) for _ in range(2))
    queries = ["delta", "spark", "unity catalog", "table", "streaming", "cluster", "sql warehouse", "notebook",
               "mlflow", "permissions", "job", "pipeline", "schema", "volume", "token", "python", "api",
               "lakehouse", "autoloader", "photon"] * 3
    results = {"bundle": bundle.name, "bundle_mib": round(size / 2**20, 1), "floor_s": round(floor, 3)}
    results.update(anyio.run(server_run, bundle, queries, []))
    results["cold_vs_floor"] = round(results["cold_list_concepts_ms"] / 1000 / floor, 2)
    if not args.skip_rss:
        with tempfile.TemporaryDirectory() as tmp:
            padded = padded_copy(bundle, 64 * 2**20 - 64 * 1024, Path(tmp))
            padded_mib = sum(p.stat().st_size for p in padded.rglob("*") if p.is_file()) / 2**20
            rss = anyio.run(rss_run, padded)
            rss["bundle_mib"] = round(padded_mib, 1)
            if rss["server_peak_rss_mib"]:
                rss["rss_vs_bundle"] = round(rss["server_peak_rss_mib"] / padded_mib, 2)
            results["padded_64mib"] = rss
    write_results("okf_read", results)


if __name__ == "__main__":
    main()

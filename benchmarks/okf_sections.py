"""search_sections on one bundle, in process: the index build, warm calls and the index's memory.

Run: knowspec bench okf_sections [--bundle DIR] [--rounds 3]  (default: $KNOWSPEC_CORPUS_DIR/databricks-okf;
a bundle within the contract's bounds, 100,000 sections and 1,000,000 tokens, is the one that
builds: databricks-okf exceeds them and answers resource_limit, e.g. ``okf_scale``'s
``$KNOWSPEC_BENCH_CACHE/okf-scale-5000`` does not). Writes benchmarks/results/okf_sections.json.

Calls the registered handler (no transport) on queries drawn from the bundle's own words (a
fixed seed: 40 one-word, 30 two-word and 10 three-word queries, and a few common or absent
words), limit 50, and reports:

- the first call (the index build and one query), and the process's RSS before and after it;
- the warm calls' p50 and mean, the best of ``--rounds`` passes over every query;
- the index's bytes (its ``nbytes``: the columns, the words and headings);
- ``answers_sha256`` over every answer, with limits 1, 5 and 100 besides: two runs, before and
  after a change, must give the same digest.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import require_bundle, write_results  # noqa: E402
from okf_memory_profile import rss_mib  # noqa: E402

WORD = re.compile(r"[A-Za-z]{3,}")


def queries_from(concepts, seed: int = 5) -> list[str]:
    """Queries made of the first concepts' own words: most of them match something."""
    words: list[str] = []
    for concept in concepts[:300]:
        words += WORD.findall(concept.body)[:40]
    vocabulary = sorted({w.lower() for w in words}) or ["none"]
    rng = random.Random(seed)
    picks = [rng.choice(vocabulary) for _ in range(40)]
    for size, count in ((2, 30), (3, 10)):
        picks += [" ".join(rng.choices(vocabulary, k=size)) for _ in range(count)]
    return picks + ["the", "a", "and of", "zzzz", "Straße"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)

    from knowspec.generated.registry import BY_NAME
    from knowspec.impl import runtime as process
    from knowspec.impl.context import CallContext
    from knowspec.impl.errors import ToolError
    from knowspec.impl.okf.derived import derived_cache
    from knowspec.impl.okf.model import load_snapshot

    entry = BY_NAME["search_sections"]
    module, _, func = entry.impl.rpartition(":")
    handler = getattr(importlib.import_module(module), func)

    def call(query: str, limit: int = 50) -> dict:
        arguments = entry.input_model.model_validate({"bundle_path": str(bundle), "query": query, "limit": limit})
        try:
            output = handler(arguments, CallContext())
            return {"structured": output.structured, "text": output.text}
        except ToolError as exc:
            return {"error": [exc.code, exc.message]}

    with process.activated() as runtime:
        snapshot = load_snapshot(str(bundle), CallContext())
        queries = queries_from(list(snapshot.concepts.values()))
        gc.collect()
        rss_before = rss_mib()
        start = time.perf_counter()
        first = call(queries[0])
        first_s = time.perf_counter() - start
        gc.collect()
        rss_after = rss_mib()
        answers = [first] + [call(q) for q in queries[1:]]
        answers += [call(q, limit) for limit in (1, 5, 100) for q in queries[:20]]
        passes = []
        for _ in range(max(1, args.rounds)):
            times = []
            for q in queries:
                start = time.perf_counter()
                call(q)
                times.append(time.perf_counter() - start)
            passes.append(times)
        best = min(passes, key=statistics.median)
        index = derived_cache(runtime).peek((snapshot.root, "sections"))
        built = index if hasattr(index, "nbytes") else None  # else the bound's refusal, kept as the value
        results = {
            "bundle": bundle.name,
            "concepts": len(snapshot.concepts),
            "first_call_s": round(first_s, 3),
            "first_call_error": first.get("error"),
            "rss_before_first_call_mib": round(rss_before, 1),
            "rss_after_first_call_mib": round(rss_after, 1),
            "index_mib": round(built.nbytes() / 2**20, 2) if built is not None else None,
            "sections": len(built) if built is not None else None,
            "warm_p50_ms": round(statistics.median(best) * 1000, 3),
            "warm_mean_ms": round(statistics.mean(best) * 1000, 3),
            "queries": len(queries),
            "hits": sum(len(a.get("structured", {}).get("hits", [])) for a in answers),
            "answers_sha256": hashlib.sha256(json.dumps(answers, sort_keys=True, ensure_ascii=False).encode()).hexdigest(),
        }
    print(json.dumps(results, indent=2))
    write_results("okf_sections", results)


if __name__ == "__main__":
    main()

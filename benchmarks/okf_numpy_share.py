"""Issue #18 goal 6, what remains: numpy's share of the OKF server, and what leaving it would cost.

Run: knowspec bench okf-numpy-share [--bundle DIR] [--rounds 3] [--probes-only]
Writes benchmarks/results/okf_numpy_share.json. Goal 6 (RSS after every read tool <= 3x the
bundle's bytes) fails by about numpy's own size, and only search_concepts' index imports numpy in
an OKF server. This benchmark measures, in one run:

- the server's RSS after the read tools of ``okf_cold_memory`` (same order, fresh servers,
  alternated), with and without the search_concepts call, and whether numpy was mapped after each:
  the figure an index without numpy would start from;
- numpy's import alone in a fresh interpreter (RSS, anonymous and file pages);
- the index's arrays (``ConceptSearchIndex.nbytes_by_part``) on the bundle, built in process;
- the two numpy-heavy builds of that index beside a pure-Python probe of each, on the bundle's
  folded bodies (best of two): the body postings with the vocabulary's trigram lists (tokens
  grouped per row, packed into ``array`` buffers) and the bodies' boundary signatures
  (separator-centred 3- and 5-grams found by ``re``, hashed, set as bits of per-bit row bitmaps);
- the body field's part of a one-word query held by most rows (the commonest tokens), numpy's
  and a pure-Python probe's (rows marked in a ``bytearray``, counted and paged by its C methods).

The probes measure the work a numpy-free index would do; they are not product code
(``tests/test_benchmark_numpy_share.py`` checks they do the same work: the builder's postings,
every bit of a query in the bodies holding it; the query probe's count is asserted equal here).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from array import array
from collections import defaultdict, deque
from functools import cache
from itertools import count, repeat
from pathlib import Path
from typing import Any, Callable

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import child_pids, compile_bytecode, require_bundle, server_memory_mib, stdio_session, timed, write_results  # noqa: E402
from okf_cold_memory import MEMORY_BOUND, bundle_bytes, first_concept, read_tool_calls  # noqa: E402

_IMPORT_COST = """
import json, re
def rss():
    status = open('/proc/self/status').read()
    return {k: int(v) / 1024 for k, v in re.findall(r'(VmRSS|RssAnon|RssFile):\\s+(\\d+)', status)}
before = rss()
import numpy
after = rss()
print(json.dumps({k: round(after[k] - before[k], 1) for k in before}))
"""


def numpy_import_mib() -> dict[str, float]:
    """What ``import numpy`` adds to a fresh interpreter's resident size."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_COST], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def numpy_mapped() -> bool | None:
    """Whether the serving child has numpy's core extension mapped (None: /proc cannot tell)."""
    for pid in child_pids():
        try:
            return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return None
    return None


async def server_rss(bundle: Path, skip: frozenset[str]) -> dict[str, Any]:
    """A fresh server's RSS after ``okf_cold_memory``'s read tools but ``skip``, and numpy's presence."""
    path = str(bundle)
    async with stdio_session() as session:
        for name, arguments in read_tool_calls(path, first_concept(bundle)):
            if name not in skip:
                await timed(session, name, arguments)
        return {"rss_mib": server_memory_mib("VmRSS"), "numpy_mapped": numpy_mapped()}


def folded_bodies(bundle: Path) -> list[bytes]:
    """Each concept file's bytes, lowered as the index folds an ASCII body (frontmatter included:
    a little more text than the index reads, the same for both sides of each comparison)."""
    return [p.read_bytes().lower() for p in sorted(bundle.rglob("*.md")) if p.name not in ("index.md", "log.md")]


def best_of_two(work: Callable[[], Any]) -> float:
    times = []
    for _ in range(2):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return round(min(times), 3)


def numpy_postings(bodies: list[bytes]) -> Any:
    """The index's own build of the body postings (``PostingsBuilder``, with its trigram lists)."""
    from knowspec.impl.okf.search.token_postings import PostingsBuilder, tokens

    builder = PostingsBuilder()
    for row, body in enumerate(bodies):
        builder.add(row, set(tokens(body)))
    return builder.finish(len(bodies))


def python_postings(bodies: list[bytes]) -> tuple[list[bytes], array, array, dict[bytes, array]]:
    """Probe: per token id the list of its rows (rows come in order, so each list is sorted),
    appended by C-level ``map`` chains, then packed into one row buffer and its offsets; and, as
    the product's build makes with them, the vocabulary's trigram lists (trigram -> ids of the
    NUL-framed tokens holding it). Gives (tokens by id, rows, offsets, trigram lists)."""
    from knowspec.impl.okf.search.token_postings import tokens

    ids: defaultdict[bytes, int] = defaultdict(count().__next__)
    id_of, groups = ids.__getitem__, []
    for row, body in enumerate(bodies):
        token_ids = list(map(id_of, set(tokens(body))))
        groups.extend([] for _ in range(len(ids) - len(groups)))
        deque(map(list.append, map(groups.__getitem__, token_ids), repeat(row)), maxlen=0)
    rows, offsets = array("I"), array("I", [0])
    for group in groups:
        rows.extend(group)
        offsets.append(len(rows))
    vocabulary = list(ids)
    trigrams: defaultdict[bytes, array] = defaultdict(lambda: array("I"))
    for token_id, token in enumerate(vocabulary):
        framed = b"\x00" + token + b"\x00"
        for gram in {framed[at:at + 3] for at in range(len(framed) - 2)}:
            trigrams[gram].append(token_id)
    return vocabulary, rows, offsets, trigrams


def probe_postings_map(bodies: list[bytes]) -> dict[bytes, list[int]]:
    """The probe's postings as token -> rows (comparable whatever the token numbering)."""
    vocabulary, rows, offsets, _ = python_postings(bodies)
    return {token: rows[offsets[i]:offsets[i + 1]].tolist() for i, token in enumerate(vocabulary)}


def numpy_signatures(bodies: list[bytes]) -> Any:
    """The index's own signing of the bodies (``boundary_signatures.sign``)."""
    from knowspec.impl.okf.search import boundary_signatures

    return boundary_signatures.sign(bodies)


@cache
def _gram_patterns() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    from knowspec.impl.okf.search.token_postings import SEPARATORS

    separator = b"[" + re.escape(SEPARATORS) + b"]"
    return re.compile(b"(?=(." + separator + b".))", re.S), re.compile(b"(?=(.." + separator + b"..))", re.S)


def probe_bits(text: bytes, *, body: bool = True) -> set[int]:
    """The probe's signature bits of ``text``: its distinct separator-centred 3-grams hashed into
    the first 2,048, its 5-grams into the next 2,048. A body is framed as the index frames it (its
    edge grams then hold frame bytes); a query is not (only grams wholly inside it count)."""
    trigrams, fives = _gram_patterns()
    framed = b"\xff\xff" + text + b"\xff\xff" if body else text
    bits = {hash(g) & 2047 for g in set(trigrams.findall(framed))}
    return bits | {2048 + (hash(g) & 2047) for g in set(fives.findall(framed))}


def python_signatures(bodies: list[bytes]) -> list[bytearray]:
    """Probe: each body's :func:`probe_bits`, set in one row bitmap per bit (what a query would
    AND together)."""
    columns = [bytearray((len(bodies) + 7) // 8) for _ in range(4096)]
    for row, body in enumerate(bodies):
        byte, bit = row >> 3, 1 << (row & 7)
        for column in probe_bits(body):
            columns[column][byte] |= bit
    return columns


def broad_query_ms(bodies: list[bytes], words: int = 3, repeats: int = 20) -> dict[str, float]:
    """The body field's part of a one-word query held by most rows, for the ``words`` commonest
    tokens: numpy (the index's union of postings, then its field array marked and paged) beside a
    pure-Python probe (rows marked in a ``bytearray`` by C-level ``map`` chains, counted and
    paged with ``bytearray.count`` / ``find``). Mean ms a query."""
    import numpy as np

    built = numpy_postings(bodies)
    vocabulary, rows, offsets, _ = python_postings(bodies)
    n = len(bodies)
    common = sorted(range(len(vocabulary)), key=lambda t: offsets[t] - offsets[t + 1])[:words]
    built_id = {token: i for i, token in enumerate(built.tokens())}

    def with_numpy(token: bytes) -> int:
        found = built._rows_of(np.asarray([built_id[token]]))
        field = np.zeros(n, dtype=np.int8)
        field[found[field[found] == 0]] = 5
        np.flatnonzero(field == 5)[:20].tolist()
        return int(np.count_nonzero(field))

    def with_python(token_id: int) -> int:
        field = bytearray(n)
        deque(map(field.__setitem__, rows[offsets[token_id]:offsets[token_id + 1]], repeat(5)), maxlen=0)
        page, at = [], field.find(5)
        while at >= 0 and len(page) < 20:
            page.append(at)
            at = field.find(5, at + 1)
        return n - field.count(0)

    def mean_ms(work: Callable[[], int]) -> float:
        work()
        started = time.perf_counter()
        for _ in range(repeats):
            work()
        return (time.perf_counter() - started) / repeats * 1000

    out = {"numpy_ms": 0.0, "pure_python_probe_ms": 0.0}
    for token_id in common:
        token = vocabulary[token_id]
        assert with_numpy(token) == with_python(token_id)
        out["numpy_ms"] += mean_ms(lambda: with_numpy(token)) / len(common)
        out["pure_python_probe_ms"] += mean_ms(lambda: with_python(token_id)) / len(common)
    out["rows_a_query"] = round(sum(offsets[t + 1] - offsets[t] for t in common) / len(common))
    return {key: round(value, 3) for key, value in out.items()}


def index_nbytes(bundle: Path) -> dict[str, float]:
    """The search index's parts on ``bundle`` (MiB), built in process as search_concepts builds it."""
    from knowspec.impl import runtime as process
    from knowspec.impl.context import CallContext
    from knowspec.impl.okf.model import load_snapshot
    from knowspec.impl.okf.search.concepts_index import index_for_snapshot

    with process.activated():
        parts = index_for_snapshot(load_snapshot(str(bundle), CallContext())).nbytes_by_part()
    return {name: round(size / 2**20, 2) for name, size in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--rounds", type=int, default=3, help="server pairs (with and without search_concepts)")
    parser.add_argument("--probes-only", action="store_true",
                        help="only the builds and the query, e.g. on a bundle past the default limits "
                             "($KNOWSPEC_BENCH_CACHE/okf-scale-50000, made by okf-scale)")
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)
    size_mib = bundle_bytes(bundle) / 2**20
    compile_bytecode()
    load_start, started = os.getloadavg(), time.perf_counter()
    rounds = []
    for _ in range(0 if args.probes_only else max(1, args.rounds)):
        rounds.append({"all_tools": anyio.run(server_rss, bundle, frozenset()),
                       "without_search_concepts": anyio.run(server_rss, bundle, frozenset({"search_concepts"}))})
    bodies = folded_bodies(bundle)
    builds = {"body_postings": {"numpy_s": best_of_two(lambda: numpy_postings(bodies)),
                                "pure_python_probe_s": best_of_two(lambda: python_postings(bodies))},
              "boundary_signatures": {"numpy_s": best_of_two(lambda: numpy_signatures(bodies)),
                                      "pure_python_probe_s": best_of_two(lambda: python_signatures(bodies))}}
    query = broad_query_ms(bodies)
    results = {"bundle": bundle.name, "bundle_mib": round(size_mib, 1),
               "goal_6_bound_mib": round(MEMORY_BOUND * size_mib, 1), "load_start": load_start,
               "rounds": rounds, "numpy_import_mib": numpy_import_mib(),
               "index_mib": None if args.probes_only else index_nbytes(bundle),
               "builds": builds, "broad_query_body_field": query,
               "load_end": os.getloadavg(), "seconds": round(time.perf_counter() - started, 1)}
    for kind in ("all_tools", "without_search_concepts") if rounds else ():
        figures = sorted(r[kind]["rss_mib"] for r in rounds if r[kind]["rss_mib"] is not None)
        mapped = {r[kind]["numpy_mapped"] for r in rounds}
        print(f"{kind}: RSS {', '.join(f'{f:.1f}' for f in figures)} MiB; numpy mapped: {sorted(mapped, key=str)}")
    print(f"goal 6 bound {results['goal_6_bound_mib']} MiB; numpy's import alone {results['numpy_import_mib']} MiB"
          + (f"; the index's parts {results['index_mib']} MiB" if results["index_mib"] else ""))
    for name, timing in builds.items():
        print(f"{name}: numpy {timing['numpy_s']} s, pure-Python probe {timing['pure_python_probe_s']} s")
    print(f"a broad one-word query's body field ({query['rows_a_query']} rows): numpy {query['numpy_ms']} ms, "
          f"pure-Python probe {query['pure_python_probe_ms']} ms")
    write_results("okf_numpy_share", results)


if __name__ == "__main__":
    main()

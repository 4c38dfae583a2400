"""Digests of every OKF read answer on a bundle, to prove a speed change left the answers alone.

Run: knowspec bench okf_answers_digest [--bundle DIR] [--label NAME]
Writes benchmarks/results/okf_answers_digest[.NAME].json: one SHA-256 per read tool over its
answers (structured content and text, in call order), in process through the registered handlers,
one over every concept's navigation links read before any tool ran, and one over each
document's parse (frontmatter with every scalar's type and tag, and the body
analysis: links, headings, heading ranges, masked spans, fences, footnotes, prose). Run it on
the code before a change and after it: every digest must be equal. The calls, in this order
(each tool's digest does not depend on it): get_neighbors of every concept (out and both, first,
so that its links are read before anything parses the bodies), list_concepts, validate_bundle,
get_semantic_graph, read_concept of every 7th concept, search_concepts and search_sections of a few
queries; errors are digested by their code and message.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import RESULTS, require_bundle  # noqa: E402

QUERIES = ["delta", "unity catalog", "spark.sql", "[link", "`", "zz-not-there", "cluster policy", "delta table",
           "TABLE’S", "fine‑tuning", "Ünity Catalog", "ÉTÉ"]


def shape(value: Any) -> Any:
    """A JSON-able form that keeps what equality of parses needs (types and YAML tags)."""
    if isinstance(value, dict):
        dup = sorted(getattr(value, "duplicates", ()))
        return {"__map__": [[shape(k), shape(v)] for k, v in value.items()], "dup": dup}
    if isinstance(value, (list, tuple)):
        return [shape(v) for v in value]
    if isinstance(value, str) and type(value) is not str:
        return {"scalar": str(value), "tag": getattr(value, "tag", None), "value": repr(getattr(value, "value", None))}
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(value).hexdigest()
    if hasattr(value, "tolist"):
        return value.tolist()
    return value if value is None or isinstance(value, (str, int, float, bool)) else repr(value)


def parse_digest(snapshot: Any) -> str:
    digest = hashlib.sha256()
    for path, doc in snapshot.documents.items():
        row: dict[str, Any] = {"path": path, "error": repr(doc.parse_error), "fm": shape(doc.frontmatter),
                               "line": doc.body_start_line}
        if doc.parse_error is None:
            md = doc.markdown
            row.update(links=shape(md.links), ranges=shape(md.heading_ranges), headings=shape(md.headings),
                       mask=shape(md.mask), fences=shape(md.fences), refs=shape(md.footnote_refs),
                       defs=shape(md.footnote_defs), prose=hashlib.sha256(md.prose.encode()).hexdigest())
        digest.update(json.dumps(row, sort_keys=True).encode())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--label", default="", help="suffix of the results file (before, after, ...)")
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)
    path = str(bundle)

    from knowspec.generated.registry import BY_NAME
    from knowspec.impl import runtime as process
    from knowspec.impl.context import CallContext
    from knowspec.impl.errors import ToolError
    from knowspec.impl.okf.model import load_snapshot

    def call(name: str, arguments: dict) -> str:
        module, _, func = BY_NAME[name].impl.rpartition(":")
        handler = getattr(importlib.import_module(module), func)
        try:
            out = handler(BY_NAME[name].input_model.model_validate(arguments), CallContext())
            return json.dumps([out.structured, out.text], sort_keys=True, default=repr)
        except ToolError as exc:
            return json.dumps(["error", exc.code, str(exc)])

    started = time.perf_counter()
    digests: dict[str, str] = {}
    with process.activated():
        snapshot = load_snapshot(path, None)
        ids = list(snapshot.concepts)
        # Every concept's navigation links, read before anything parses the bodies.
        digests["links"] = hashlib.sha256(json.dumps(
            [[cid, shape(snapshot.concepts[cid].links)] for cid in ids]).encode()).hexdigest()
        print(f"links: {digests['links']}", flush=True)
        plan: dict[str, list[dict]] = {  # get_neighbors first: it reads links before any parse
            "get_neighbors": [{"bundle_path": path, "concept_id": cid, "direction": d}
                              for cid in ids for d in ("out", "both")],
            "list_concepts": [{"bundle_path": path}],
            "validate_bundle": [{"bundle_path": path}],
            "get_semantic_graph": [{"bundle_path": path}],
            "read_concept": [{"bundle_path": path, "concept_id": cid} for cid in ids[::7]],
            "search_concepts": [{"bundle_path": path, "query": q} for q in QUERIES],
            "search_sections": [{"bundle_path": path, "query": q} for q in QUERIES],
        }
        for name, calls in plan.items():
            digest = hashlib.sha256()
            for arguments in calls:
                digest.update(call(name, arguments).encode())
            digests[name] = digest.hexdigest()
            print(f"{name} ({len(calls)} calls): {digests[name]}", flush=True)
        digests["parses"] = parse_digest(snapshot)
        print(f"parses: {digests['parses']}", flush=True)
    results = {"bundle": bundle.name, "digests": digests, "seconds": round(time.perf_counter() - started, 1)}
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"okf_answers_digest{'.' + args.label if args.label else ''}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()

"""The answers of every OKF read tool on a bundle, hashed: a memory change must leave them all equal.

Run: knowspec bench okf_answer_hashes [--bundle DIR] [--out FILE]
(default bundle: $KNOWSPEC_CORPUS_DIR/databricks-okf). Calls the read handlers in process on a
fixed set of arguments (the memory benchmarks' calls, plus several concepts, queries with one
token, several words, punctuation, non-ASCII letters and no hit, both neighbour directions) and
records per call the SHA-256 of its structured answer (canonical JSON) and of its text, or the
error's code and message. Compare two runs' files (before and after a change) with ``diff``:
the file holds no time and no path.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import RESULTS, require_bundle  # noqa: E402
from okf_cold_memory import read_tool_calls  # noqa: E402

QUERIES = ("delta", "delta table", "Unity Catalog", "sql warehouse", "café", "straße", "ÜBER", "a", "-",
           "spark.conf.set", "no-such-text-anywhere-42", "CREATE TABLE", "ml", "x")


def calls(path: str, concept_ids: list[str]) -> list[tuple[str, dict]]:
    out = list(read_tool_calls(path, concept_ids[0]))
    for cid in concept_ids:
        out.append(("read_concept", {"bundle_path": path, "concept_id": cid}))
        out.append(("get_neighbors", {"bundle_path": path, "concept_id": cid, "direction": "both"}))
        out.append(("get_neighbors", {"bundle_path": path, "concept_id": cid, "direction": "in"}))
    for query in QUERIES:
        out.append(("search_concepts", {"bundle_path": path, "query": query, "limit": 100}))
        out.append(("search_sections", {"bundle_path": path, "query": query}))
    return out


def sample_ids(bundle: Path, n: int = 6) -> list[str]:
    """``n`` concept IDs spread over the bundle's path order."""
    paths = sorted(p for p in bundle.rglob("*.md") if p.name not in ("index.md", "log.md"))
    step = max(1, len(paths) // n)
    return [p.relative_to(bundle).as_posix()[:-3] for p in paths[::step][:n]]


def digest(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "okf_answer_hashes.json")
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)

    from knowspec.generated.registry import BY_NAME
    from knowspec.impl import runtime as process
    from knowspec.impl.context import CallContext, ToolOutput
    from knowspec.impl.errors import ToolError

    rows = []
    with process.activated():
        for name, arguments in calls(str(bundle), sample_ids(bundle)):
            module, _, func = BY_NAME[name].impl.rpartition(":")
            handler = getattr(importlib.import_module(module), func)
            shown = {k: v for k, v in arguments.items() if k != "bundle_path"}
            try:
                output = handler(BY_NAME[name].input_model.model_validate(arguments), CallContext())
            except ToolError as exc:
                rows.append({"tool": name, "arguments": shown, "error": exc.code, "message": digest(exc.message)})
                continue
            if not isinstance(output, ToolOutput):
                output = ToolOutput(structured=output)
            rows.append({"tool": name, "arguments": shown, "structured": digest(output.structured),
                         "text": digest(output.text) if output.text is not None else None})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"bundle": bundle.name, "calls": rows}, indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    print(f"{len(rows)} answers hashed into {args.out}")


if __name__ == "__main__":
    main()

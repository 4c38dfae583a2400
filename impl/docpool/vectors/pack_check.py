"""``knowspec model check``: is the pack in a folder intact and usable by this server?

Checks that the files ``pack.json`` lists are there with their recorded SHA-256, that the pack
loads through the run-time embedder (so the runtime is present), and that the retrieval sanity
queries still find their own passages.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from knowspec.impl.docpool.vectors.embedder import PACK_FILE, clear_cache, load_embedder
from knowspec.impl.docpool.vectors.pack_builder import SANITY_PAIRS
from knowspec.impl.errors import ToolError


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_pack(model_dir: Path) -> dict:
    """A report ``{ok, problems, model, dim, sanity_hits, sanity_of}``; never raises for a bad pack."""
    model_dir = Path(model_dir)
    problems: list[str] = []
    meta: dict = {}
    meta_path = model_dir / PACK_FILE
    if meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        for name, facts in meta.get("files", {}).items():
            path = model_dir / name
            if not path.exists():
                problems.append(f"{name} missing")
            elif _sha256(path) != facts.get("sha256"):
                problems.append(f"{name} differs from the file the pack was built with")
    else:
        problems.append(f"{PACK_FILE} missing (identity and cosine report unknown)")
    report = {"ok": False, "problems": problems, "model": meta.get("model"), "dim": meta.get("dim"),
              "sanity_hits": 0, "sanity_of": len(SANITY_PAIRS)}
    clear_cache()
    try:
        embedder = load_embedder(model_dir)
    except ToolError as exc:
        problems.append(f"{exc.message}: {exc.diagnostics[0]['message'] if exc.diagnostics else ''}")
        return report
    qp = meta.get("query_prefix", embedder.info.query_prefix)
    pp = meta.get("passage_prefix", embedder.info.passage_prefix)
    queries = embedder.embed([q for q, _ in SANITY_PAIRS], qp)
    passages = embedder.embed([p for _, p in SANITY_PAIRS], pp)
    best = np.argmax(queries @ passages.T, axis=1)
    report["sanity_hits"] = int((best == np.arange(len(SANITY_PAIRS))).sum())
    report["dim"] = embedder.info.dim
    report["ok"] = not problems
    return report

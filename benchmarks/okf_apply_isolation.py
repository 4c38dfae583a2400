"""Torn reads during many-file applies (issue 19 item 3), in-process through the real handlers.

Run: .venv/bin/python benchmarks/okf_apply_isolation.py [--concepts 255] [--applies 3]
     [--readers 2] [--workdir /tmp]
A fresh bundle of N concepts is written under --workdir; the main thread previews and applies
``--applies`` patches that each move every concept's ``stale_after`` to a new date, while reader
threads call ``list_concepts`` in a loop. A listing whose cards carry more than one date is torn
(part old, part new). Prints reads, torn reads and the mean apply time as JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from knowspec.generated.models.okf.apply_concept_patch_input_schema import ApplyConceptPatchInput
from knowspec.generated.models.okf.list_concepts_input_schema import ListConceptsInput
from knowspec.generated.models.okf.preview_concept_patch_input_schema import PreviewConceptPatchInput
from knowspec.impl.context import CallContext
from knowspec.impl.okf.tools import read as read_tools
from knowspec.impl.okf.tools import write as write_tools

ACTOR = "human:bench"


def make_bundle(root: Path, concepts: int) -> None:
    (root / "c").mkdir(parents=True)
    entries = "".join(f"- [Note {i}](c/n{i:04d}.md)\n" for i in range(concepts))  # a conformant base
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Index\n\n' + entries)
    for i in range(concepts):
        (root / "c" / f"n{i:04d}.md").write_text(f"---\ntype: Note\ntitle: Note {i}\nstatus: draft\n---\nBody {i}\n")


def listing_dates(root: Path) -> set:
    args = ListConceptsInput(bundle_path=str(root))
    return {c["stale_after"] for c in read_tools.list_concepts(args, CallContext()).structured["concepts"]}


def apply_date(root: Path, concepts: int, date: str) -> float:
    ops = [{"kind": "set_lifecycle", "concept_id": f"c/n{i:04d}", "lifecycle": {"status": "stable", "stale_after": date}}
           for i in range(concepts)]
    base = dict(bundle_path=str(root), actor=ACTOR, operations=ops)
    plan = write_tools.preview_concept_patch(PreviewConceptPatchInput.model_validate(base), CallContext()).structured
    start = time.perf_counter()
    out = write_tools.apply_concept_patch(ApplyConceptPatchInput.model_validate(
        {**base, "expected_revision": plan["base_revision"], "expected_plan_digest": plan["plan_digest"]}),
        CallContext())
    assert out.structured["status"] == "applied", out.structured
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concepts", type=int, default=255)
    parser.add_argument("--applies", type=int, default=3)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--workdir", default="/tmp")
    ns = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="okf-isolation-", dir=ns.workdir)) / "b"
    make_bundle(root, ns.concepts)
    stop, lock = threading.Event(), threading.Lock()
    stats = {"reads": 0, "torn": 0}

    def reader() -> None:
        while not stop.is_set():
            torn = len(listing_dates(root)) != 1
            with lock:
                stats["reads"] += 1
                stats["torn"] += torn

    threads = [threading.Thread(target=reader) for _ in range(ns.readers)]
    for t in threads:
        t.start()
    try:
        times = [apply_date(root, ns.concepts, f"20{30 + r}-01-01") for r in range(ns.applies)]
    finally:
        stop.set()
        for t in threads:
            t.join()
    print(json.dumps({**vars(ns), **stats, "apply_seconds_mean": round(sum(times) / len(times), 3)}))


if __name__ == "__main__":
    main()

"""OKF write-side benchmark on the databricks corpus (issue 4: write side, performance).

Run: .venv/bin/python benchmarks/okf_write.py [--bundle DIR]  (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)
     [--sizes 500,2000,5000] [--rounds 5] [--workdir /tmp/okf-write-bench]
Writes benchmarks/results/okf_write.json. Every bundle is a copy under --workdir (the
corpus is never written). Reports, client-side through the real stdio server:
- per cut size (N concept documents plus the root index): p50/p95 of preview_concept_patch and
  apply_concept_patch of a one-concept ``set_lifecycle`` patch (``stale_after`` moves each round so
  every apply publishes);
- on the full copy: the v0.1 -> v0.2 migration with explicit timestamp producer and one citation
  mapping per legacy entry. The preview's whole-file diff of ~5,000 rewritten documents exceeds
  the contract's 1 MiB cap, so the MCP preview answers ``resource_limit`` (its time, which
  includes the whole plan, is reported); the proof is then built in-process by the same planner
  (timed separately) and the apply runs through the server.
Citation sections the converter cannot take losslessly are normalized in the copy first (the
section is removed, which is what the ``normalize_citations_section`` manual action asks a
person to do); their count is reported.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, require_bundle, stdio_session, timed, write_results  # noqa: E402

from knowspec.impl.okf.write.citations import CitationBlocked, convert, find_section  # noqa: E402
from knowspec.impl.okf.write.document import split_document  # noqa: E402

PRODUCER = "process:okf-write-bench"
_SLUG = re.compile(r"[^a-z0-9-]+")


def cut_copy(bundle: Path, dest: Path, concepts: int | None) -> Path:
    """``concepts`` documents of ``concepts/`` (sorted) plus the root index; None = full copy."""
    if dest.exists():
        shutil.rmtree(dest)
    if concepts is None:
        shutil.copytree(bundle, dest)
        return dest
    (dest / "concepts").mkdir(parents=True)
    shutil.copy2(bundle / "index.md", dest / "index.md")
    for path in sorted((bundle / "concepts").glob("*.md"))[:concepts]:
        shutil.copy2(path, dest / "concepts" / path.name)
    return dest


def citation_mappings(bundle: Path) -> tuple[list[dict], int]:
    """One explicit mapping per legacy entry (selected by its exact text); sections the converter
    refuses are removed from the copy first. Returns (mappings, normalized section count)."""
    mappings, normalized = [], 0
    for path in sorted(bundle.rglob("*.md")):
        rel = path.relative_to(bundle).as_posix()
        if path.name in ("index.md", "log.md"):
            continue
        doc = split_document(path.read_bytes())
        entries = _entries(doc.body)
        try:
            if entries is not None:
                convert(doc.body, entries)  # the pure rule: refuses what the migration would block
        except CitationBlocked:
            entries = None
        if entries is None:
            start = doc.body.find("\n# Citations")
            if start >= 0:
                path.write_bytes((doc.open_line + doc.frontmatter + doc.close_line + doc.body[:start + 1]).encode())
                normalized += 1
            continue
        if entries:
            mappings.append({"path": rel, "entries": entries})
    return mappings, normalized


def _entries(body: str) -> list[dict] | None:
    """One mapping entry per legacy citation ([] without a section, None when refused)."""
    try:
        section = find_section(body)
    except CitationBlocked:
        return None
    if section is None:
        return []
    entries, ids = [], {}
    for e in section.entries:
        slug = _SLUG.sub("-", Path(e.resource).stem.lower()).strip("-")[:80] or "source"
        key = (e.title, e.resource, e.link_title)
        if key not in ids:
            ids[key] = slug if slug not in ids.values() else f"{slug}-{len(ids)}"
        entries.append({"source_id": ids[key], "legacy_entry": e.raw})
    return entries


def migration_args(bundle: Path, mappings: list[dict]) -> dict:
    return {"bundle_path": str(bundle), "timestamp_policy": "preserve", "generated_by": PRODUCER,
            "citation_mappings": mappings}


def in_process_proof(args: dict) -> tuple[float, dict]:
    """The preview's source, proof and digest without the diff (which the MCP cap refuses)."""
    from knowspec.generated.models.okf.preview_v02_migration_input_schema import PreviewV02MigrationInput
    from knowspec.impl.okf.write import bundle_io
    from knowspec.impl.okf.write.migration_flow import _plan
    from knowspec.impl.okf.write.migration_plan import decode_migration, proof_digest
    from knowspec.impl.okf.write.migration_source import resolve_source

    start = time.perf_counter()
    inp, _ = decode_migration(PreviewV02MigrationInput.model_validate(args))
    with bundle_io.pinned(args["bundle_path"]) as root_fd:
        files, base = bundle_io.capture(root_fd)
    source = resolve_source(files, inp.selector)
    _, out, proof = _plan(files, base, inp, source)
    elapsed = (time.perf_counter() - start) * 1000
    if proof is None:
        raise SystemExit(f"migration blocked: {out.blockers[:3]}")
    return elapsed, {"expected_source": source, "proof": proof, "expected_plan_digest": proof_digest(proof),
                     "writes": len(proof["writes"])}


async def patch_rounds(session, bundle: Path, rounds: int) -> dict:
    concept = sorted((bundle / "concepts").glob("*.md"))[0].stem
    previews, applies = [], []
    for i in range(rounds):
        op = {"kind": "set_lifecycle", "concept_id": f"concepts/{concept}",
              "lifecycle": {"status": "stable", "stale_after": f"{2031 + i}-01-01"}}
        args = {"bundle_path": str(bundle), "actor": "human:bench", "operations": [op]}
        ms, result = await timed(session, "preview_concept_patch", args)
        p = result.structured_content
        assert not result.is_error and p["status"] == "applicable", p
        previews.append(ms)
        ms, result = await timed(session, "apply_concept_patch", {
            **args, "expected_revision": p["base_revision"], "expected_plan_digest": p["plan_digest"]})
        assert not result.is_error and result.structured_content["status"] == "applied", result.structured_content
        applies.append(ms)
    return {"concept": f"concepts/{concept}", "preview": percentiles(previews), "apply": percentiles(applies)}


async def run(args) -> dict:
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"load_before": os.getloadavg(), "sizes": {}}
    async with stdio_session() as session:
        for size in args.sizes:
            bundle = cut_copy(args.bundle, work / f"cut-{size}", size)
            docs = sum(1 for _ in bundle.rglob("*.md"))
            result = await patch_rounds(session, bundle, args.rounds)
            out["sizes"][str(size)] = {"documents": docs, **result}
            print(size, result, flush=True)
        full = cut_copy(args.bundle, work / "full", None)
        mappings, normalized = citation_mappings(full)
        margs = migration_args(full, mappings)
        ms, result = await timed(session, "preview_v02_migration", margs)
        preview = {"ms": round(ms, 1), "is_error": bool(result.is_error),
                   "status_or_code": (result.structured_content or {}).get("status")
                   or (result.structured_content or {}).get("code")}
        plan_ms, bound = in_process_proof(margs)
        writes = bound.pop("writes")
        ms_apply, applied = await timed(session, "apply_v02_migration", {**margs, **bound})
        assert not applied.is_error, applied.structured_content
        out["migration"] = {
            "documents": sum(1 for _ in full.rglob("*.md")),
            "citation_documents": len(mappings), "citation_entries": sum(len(m["entries"]) for m in mappings),
            "normalized_sections": normalized, "written_files": writes,
            "mcp_preview": preview, "in_process_plan_ms": round(plan_ms, 1),
            "mcp_apply_ms": round(ms_apply, 1), "apply_status": applied.structured_content["status"],
            "changed_paths": len(applied.structured_content["changed_paths"]),
        }
    out["load_after"] = os.getloadavg()
    out["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[500, 2000, 5000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir", default="/tmp/okf-write-bench")
    args = parser.parse_args()
    args.bundle = require_bundle(args.bundle)
    if Path(args.workdir).resolve().is_relative_to(args.bundle.resolve().parent):
        raise SystemExit("--workdir must not be inside the corpora folder")
    result = anyio.run(run, args)
    write_results("okf_write", {"corpus": args.bundle.name, "rounds": args.rounds, **result})


if __name__ == "__main__":
    main()

"""OKF write-side benchmark (issue 18 goal 2: writes cost the change, not the bundle).

Run: .venv/bin/knowspec bench okf-write [--sizes 5000,9990] [--rounds 7] [--floor-rounds 30]
     [--history 1000] [--bundle DIR | $KNOWSPEC_CORPUS_DIR] [--no-migration]
     [--workdir /tmp/okf-write-bench]
Writes benchmarks/results/okf_write.json. Everything is measured in one run, with the load
average at start and end (the machine may be shared: trust the ratios, not the absolute times):
- the one-file floor, in this process: read one concept file, parse it, apply the same
  ``set_lifecycle`` edit, dump it, write a temporary file, fsync, rename (p50 of --floor-rounds
  before the calls, the goal's floor; and, for the record, of the rounds run one before each
  preview and each apply, ``floor_beside``);
- per synthetic bundle of N v0.2 concepts (plus the root index; 9,990 stays under the 10,000-file
  capture limit, and a larger size starts the server with that limit raised, ``raised_limits``):
  p50/p95 of preview_concept_patch and apply_concept_patch of a one-concept ``set_lifecycle``
  patch (``stale_after`` moves each round so every apply publishes), client-side through the
  real stdio server, each p50 divided by the floor, against the goal's bound (20x;
  the ratio to ``floor_beside`` is printed beside it),
  and the server's CPU per call (``server_cpu_ms_p50``: what the code costs without the disk);
  each bundle holds the receipts of --history earlier commits (a bundle edited that often within
  the store's day of retention: the newest 1,000 always stay), as a bundle in use does;
- with the corpus (``--bundle`` or ``$KNOWSPEC_CORPUS_DIR``, unless --no-migration): the v0.1 ->
  v0.2 migration of a full copy, with explicit timestamp producer and one citation mapping per
  legacy entry, its times beside the floor (whole-bundle rewrites have no bound). The preview's
  whole-file diff of ~5,000 rewritten documents exceeds the contract's 1 MiB cap, so the MCP
  preview answers ``resource_limit`` (its time, which includes the whole plan, is reported); the
  proof is then built in-process by the same planner (timed separately) and the apply runs through
  the server.
Citation sections the converter cannot take losslessly are normalized in the copy first (the
section is removed, which is what the ``normalize_citations_section`` manual action asks a
person to do); their count is reported.
Every bundle is built or copied under --workdir (the corpus is never written).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, require_bundle, server_thread_cpu_ns, stdio_session, timed, write_results  # noqa: E402

from knowspec.impl.okf.bundle.limits import DEFAULT_MAX_FILES  # noqa: E402
from knowspec.impl.okf.write.citations import CitationBlocked, convert, find_section  # noqa: E402
from knowspec.impl.okf.write import receipts  # noqa: E402
from knowspec.impl.okf.write.document import split_document  # noqa: E402
from knowspec.impl.okf.write.patch import apply_concept_operation  # noqa: E402

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


def in_process_proof(args: dict) -> tuple[float, dict | None, list]:
    """The preview's source, proof and digest without the diff (which the MCP cap refuses);
    None and the blockers when the migration is blocked."""
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
    _, out, proof = _plan(files, base, inp, source, lambda: None)
    elapsed = (time.perf_counter() - start) * 1000
    if proof is None:
        return elapsed, None, list(out.blockers)
    return elapsed, {"expected_source": source, "proof": proof, "expected_plan_digest": proof_digest(proof),
                     "writes": len(proof["writes"])}, []


BOUND = 20.0  # goal: one-concept preview/apply p50 <= 20x the one-file floor, at every size
_TAGS = ("ingest", "storage", "compute", "governance", "ml", "serving", "streaming", "sql")


def synthetic_concept(i: int, total: int) -> str:
    """A conformant v0.2 concept of ~3 KB: frontmatter with sources, sections, links, footnotes."""
    links = "".join(f"- [Note {j}](n{j:05d}.md)\n" for j in ((i + 1) % total, (i + 7) % total, (i + 31) % total))
    para = (f"Concept {i} describes one part of a synthetic platform. It is written so that the parser, "
            "the strict checks and the link resolver all have real work to do, like a generated wiki page. ")
    return (f"---\ntype: Note\ntitle: Note {i}\ndescription: Synthetic concept {i} for the write benchmark\n"
            f"tags:\n  - {_TAGS[i % 8]}\n  - {_TAGS[(i + 3) % 8]}\nstatus: draft\n"
            f"timestamp: \"2026-01-{1 + i % 28:02d}T10:00:00Z\"\n"
            f"sources:\n  - id: src-{i}\n    resource: https://example.org/docs/{i}\n    title: Source {i}\n---\n"
            f"# Overview\n\n{para * 4}[^src-{i}]\n\n# Details\n\n{para * 6}\n\n"
            f"# Examples\n\n```sql\nSELECT {i} AS id;\n```\n\n# Related\n\n{links}\n"
            f"[^src-{i}]: Source {i}.\n")


def synthetic_bundle(dest: Path, concepts: int) -> Path:
    """A fresh conformant v0.2 bundle of ``concepts`` documents under ``c/`` plus the root index."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "c").mkdir(parents=True)
    entries = "".join(f"- [Note {i}](c/n{i:05d}.md)\n" for i in range(concepts))
    (dest / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Index\n\n' + entries)
    for i in range(concepts):
        (dest / "c" / f"n{i:05d}.md").write_text(synthetic_concept(i, concepts))
    return dest


def raised_limits(largest: int) -> tuple[str, ...]:
    """The server flags an operator gives for a bundle past the contract's 10,000 files (goal 8):
    ``--sizes 5000,50000`` times the same edit where the bundle is ten times larger."""
    if largest + 1 < DEFAULT_MAX_FILES:
        return ()
    return ("--max-bundle-files", str(largest + 1000), "--max-bundle-bytes", str(1 << 30))


def earlier_commits(bundle: Path, count: int) -> None:
    """The receipts ``count`` earlier commits would have left in the bundle's store."""
    if count <= 0:
        return
    folder = bundle / ".okf" / receipts.RECEIPTS_DIR
    folder.mkdir(parents=True)
    for i in range(count):
        revision = f"sha256:{i:064x}"
        receipt = receipts.Receipt(
            ChangeSetID=f"earlier-{i}", IdempotencyKey=f"earlier-{i}", RequestDigest=revision,
            BaseRevision=revision, ResultRevision=revision, CommitTime=receipts.now_utc(),
            ChangedRefs=("c/n00000",), ChangedFiles=({"Kind": "write", "Path": "c/n00000.md"},))
        (folder / receipts.receipt_name(receipt.IdempotencyKey)).write_bytes(receipt.to_bytes())


class Floor:
    """The least work a one-concept edit needs (read, parse, edit, dump, fsync, rename), one round
    at a time: timed before the calls (the goal's floor), and once beside each preview and apply
    (this host's fsync swings within a run, and a round after a call meets an idle core)."""

    def __init__(self, work: Path) -> None:
        self.folder = work / "floor"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "n00000.md"
        self.path.write_text(synthetic_concept(0, 1))
        self.done = 0

    def round(self) -> tuple[float, float]:
        """(the whole round, its read + parse + edit + dump) in ms."""
        op = {"kind": "set_lifecycle", "concept_id": "c/n00000",
              "lifecycle": {"status": "stable", "stale_after": f"{2031 + self.done % 900}-01-01"}}
        self.done += 1
        start = time.perf_counter()
        edited = apply_concept_operation(split_document(self.path.read_bytes()), op).render().encode("utf-8")
        edit_ms = (time.perf_counter() - start) * 1000
        tmp = self.folder / ".n00000.md.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, edited)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        return (time.perf_counter() - start) * 1000, edit_ms


def one_file_floor(floor: Floor, rounds: int) -> dict:
    """p50 of ``rounds`` floor rounds one after another."""
    samples = [floor.round() for _ in range(rounds)]
    return {**percentiles([whole for whole, _ in samples]),
            "read_parse_edit_dump_p50_ms": percentiles([edit for _, edit in samples])["p50_ms"]}


async def patch_rounds(session, bundle: Path, rounds: int, concept: str, floor: Floor) -> dict:
    """p50/p95 wall of each tool, and beside it the server's CPU per call (median): the wall of
    an apply is eight fsyncs and moves with the disk, its CPU only with the code. A floor round
    runs before each preview and each apply (``floor_beside``)."""
    previews, applies, beside = [], [], []
    cpu: dict[str, list[float]] = {"preview": [], "apply": []}

    async def call(tool: str, name: str, arguments: dict) -> tuple[float, object]:
        before = server_thread_cpu_ns()
        ms, result = await timed(session, tool, arguments)
        after = server_thread_cpu_ns()
        if before is not None and after is not None:
            cpu[name].append((after - before) / 1e6)
        return ms, result

    for i in range(rounds):
        op = {"kind": "set_lifecycle", "concept_id": concept,
              "lifecycle": {"status": "stable", "stale_after": f"{2031 + i}-01-01"}}
        args = {"bundle_path": str(bundle), "actor": "human:bench", "operations": [op]}
        beside.append(floor.round()[0])
        ms, result = await call("preview_concept_patch", "preview", args)
        p = result.structured_content
        assert not result.is_error and p["status"] == "applicable", p
        previews.append(ms)
        beside.append(floor.round()[0])
        ms, result = await call("apply_concept_patch", "apply", {
            **args, "expected_revision": p["base_revision"], "expected_plan_digest": p["plan_digest"]})
        assert not result.is_error and result.structured_content["status"] == "applied", result.structured_content
        applies.append(ms)
    return {"concept": concept, "preview": percentiles(previews), "apply": percentiles(applies),
            "floor_beside": percentiles(beside),
            "server_cpu_ms_p50": {name: round(statistics.median(ms), 3) if ms else None for name, ms in cpu.items()}}


def ratios(result: dict, floor_ms: float) -> dict:
    """Each tool's p50 against the floor timed before the calls (the goal's ratio), and beside it
    the ratio to the floor timed among the calls (``floor_beside``): how far the disk and the
    host moved between the two is then in the same run's record."""
    out = {}
    for tool in ("preview", "apply"):
        ratio = result[tool]["p50_ms"] / floor_ms
        out[tool] = {"ratio_to_floor": round(ratio, 1), "bound": BOUND, "pass": ratio <= BOUND,
                     "ratio_to_floor_beside": round(result[tool]["p50_ms"] / result["floor_beside"]["p50_ms"], 1)}
    return out


async def migration_row(session, bundle: Path, work: Path) -> dict:
    full = cut_copy(bundle, work / "full", None)
    mappings, normalized = citation_mappings(full)
    margs = migration_args(full, mappings)
    ms, result = await timed(session, "preview_v02_migration", margs)
    preview = {"ms": round(ms, 1), "is_error": bool(result.is_error),
               "status_or_code": (result.structured_content or {}).get("status")
               or (result.structured_content or {}).get("code")}
    plan_ms, bound, blockers = in_process_proof(margs)
    row = {"documents": sum(1 for _ in full.rglob("*.md")),
           "citation_documents": len(mappings), "citation_entries": sum(len(m["entries"]) for m in mappings),
           "normalized_sections": normalized, "mcp_preview": preview, "in_process_plan_ms": round(plan_ms, 1)}
    if bound is None:  # the corpus itself blocks the migration (e.g. documents without a type)
        codes: dict[str, int] = {}
        for b in blockers:
            codes[b["code"]] = codes.get(b["code"], 0) + 1
        return {**row, "apply_status": "blocked", "blockers": codes}
    writes = bound.pop("writes")
    ms_apply, applied = await timed(session, "apply_v02_migration", {**margs, **bound})
    assert not applied.is_error, applied.structured_content
    return {**row, "written_files": writes, "mcp_apply_ms": round(ms_apply, 1),
            "apply_status": applied.structured_content["status"],
            "changed_paths": len(applied.structured_content["changed_paths"])}


async def run(args) -> dict:
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"load_before": os.getloadavg(), "bound": BOUND, "earlier_commits": args.history, "sizes": {}}
    floor_edit = Floor(work)
    floor = one_file_floor(floor_edit, args.floor_rounds)
    out["floor"] = floor
    print("one-file floor", floor, flush=True)
    async with stdio_session(*raised_limits(max(args.sizes))) as session:
        for size in args.sizes:
            bundle = synthetic_bundle(work / f"synthetic-{size}", size)
            earlier_commits(bundle, args.history)
            # The first call of a bundle loads it; it is reported apart from the steady state.
            ms, first = await timed(session, "preview_concept_patch", {
                "bundle_path": str(bundle), "actor": "human:bench", "operations": [
                    {"kind": "set_lifecycle", "concept_id": "c/n00000",
                     "lifecycle": {"status": "stable", "stale_after": "2030-01-01"}}]})
            assert not first.is_error, first.structured_content
            result = await patch_rounds(session, bundle, args.rounds, f"c/n{size // 2:05d}", floor_edit)
            row = {"documents": size + 1, "first_preview_ms": round(ms, 1), **result,
                   **{f"{k}_vs_floor": v for k, v in ratios(result, floor["p50_ms"]).items()}}
            out["sizes"][str(size)] = row
            print(size, row, flush=True)
        if args.bundle is not None:
            out["migration"] = {**await migration_row(session, args.bundle, work), "floor_p50_ms": floor["p50_ms"]}
            print("migration", out["migration"], flush=True)
    out["all_pass"] = all(r[f"{t}_vs_floor"]["pass"] for r in out["sizes"].values() for t in ("preview", "apply"))
    out["load_after"] = os.getloadavg()
    out["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF corpus for the migration row (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--no-migration", action="store_true", help="skip the corpus migration row")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[5000, 9990])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--floor-rounds", type=int, default=30)
    parser.add_argument("--history", type=int, default=1000,
                        help="receipts of earlier commits in each bundle's store (0: a bundle never edited)")
    parser.add_argument("--workdir", default="/tmp/okf-write-bench")
    args = parser.parse_args()
    if args.no_migration:
        args.bundle = None
    elif args.bundle is not None or os.environ.get("KNOWSPEC_CORPUS_DIR"):
        args.bundle = require_bundle(args.bundle)
        if Path(args.workdir).resolve().is_relative_to(args.bundle.resolve().parent):
            raise SystemExit("--workdir must not be inside the corpora folder")
    result = anyio.run(run, args)
    write_results("okf_write", {"corpus": args.bundle.name if args.bundle else None, "rounds": args.rounds, **result})


if __name__ == "__main__":
    main()

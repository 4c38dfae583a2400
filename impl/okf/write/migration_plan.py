"""v0.1 -> v0.2 migration planning (spec/okf/contract/write.md §5.1, §5.5, §2.6): decode, plan, prove.

Pure: from the captured files and the caller's explicit inputs it builds the post-state
(root ``okf_version`` -> ``0.2``, legacy ``timestamp`` -> ``generated`` with an explicit
producer, explicit computations), or the blockers and manual actions that stop it. The proof
is content-free and its digest binds preview and apply.

Legacy ``# Citations`` sections are converted by ``citations`` (explicit mappings only);
blockers carry the file byte span of the text that stops the migration.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Mapping

from ruamel.yaml.nodes import MappingNode

from knowspec.generated.models.okf.apply_v02_migration_input_schema import ApplyV02MigrationInput
from knowspec.generated.models.okf.preview_v02_migration_input_schema import PreviewV02MigrationInput
from knowspec.impl.okf.write.changeset import ChangeSet, request_digest
from knowspec.impl.okf.write.computation_body import ComputationBodyRejected
from knowspec.impl.okf.write.document import Document, DocumentError, split_document
from knowspec.impl.okf.write.encoding import ZERO_REVISION, enc_str, enc_strs, sha256_hex, u64
from knowspec.impl.okf.write.inputs import (
    check_actor, check_computation, invalid, is_rfc3339, plain, valid_actor,
)
from knowspec.impl.okf.write.migration_citations import (
    convert_document, decode_citations, frontmatter_span, has_section, label_collisions, node_span, section_span,
)
from knowspec.impl.okf.write.patch import PatchRejected, put_attested_computation, set_bundle_version
from knowspec.impl.okf.write.paths import concept_id_problem, is_revision_path, is_writable_path
from knowspec.impl.okf.write.planner import staged_validation
from knowspec.impl.okf.write.revision import revision_of
from knowspec.impl.okf.write.yaml_edit import Editor, RootEdits
from knowspec.impl.okf.write.yaml_text import YamlRejected, lookup, scalar

ACTOR = "tool:okf-mcp"
ID_SENTINEL = "mcp-migration-identity-sentinel-v1"
_B = lambda s: s.encode("utf-8")  # noqa: E731 - byte-wise ordering


@dataclass(frozen=True)
class MigrationInput:
    selector: str
    generated_by: str
    generated_at: dict[str, str]            # concept path -> at
    conflict_policy: str
    timestamp_policy: str
    citations: list[dict]
    computations: list[dict]                # {path, contract, asset}

    def operation(self) -> dict:
        return {"kind": "migrate_v01_to_v02", "generated_by": self.generated_by,
                "timestamp_policy": self.timestamp_policy, "timestamp_conflict": self.conflict_policy,
                "generated_at": sorted(self.generated_at.items(), key=lambda kv: _B(kv[0])),
                "citations": [(m["path"], sorted(m["entries"], key=lambda e: (e.get("legacy_number") or 0,
                                                                              _B(e.get("legacy_entry") or ""),
                                                                              _B(e["source_id"]))))
                              for m in sorted(self.citations, key=lambda m: _B(m["path"]))],
                "computations": [(c["path"], c["contract"], c["asset"])
                                 for c in sorted(self.computations, key=lambda c: _B(c["path"]))]}


def decode_migration(args: PreviewV02MigrationInput | ApplyV02MigrationInput) -> tuple[MigrationInput, dict]:
    """The rules the schema cannot state; it already bounds ``from`` and both policies."""
    data = plain(args)
    by = args.generated_by or ""
    if by:
        check_actor("generated_by", by, grammar=True)
    generated_at: dict[str, str] = {}
    for i, entry in enumerate(data.get("generated_at") or []):
        problem = concept_id_problem(entry.get("concept_id") or "")
        if problem or not is_rfc3339(entry.get("at")):
            raise invalid(f"generated_at[{i}] needs a canonical concept_id and an RFC3339 at")
        path = entry["concept_id"] + ".md"
        if path in generated_at:
            raise invalid(f"generated_at[{i}] repeats a concept")
        generated_at[path] = entry["at"]
    citations = decode_citations(data.get("citation_mappings") or [])
    computations, paths = [], set()
    for i, c in enumerate(data.get("computations") or []):
        problem = concept_id_problem(c.get("concept_id") or "")
        if problem:
            raise invalid(f"computations[{i}].concept_id: {problem}")
        check_computation(f"computations[{i}].contract", c.get("contract"))
        asset = c.get("asset")
        if (c["contract"]["mode"] == "file") != (asset is not None):
            raise invalid(f"computations[{i}]: file mode needs asset, inline mode forbids it")
        if asset is not None and (not is_writable_path(asset.get("path") or "") or asset["path"].endswith(".md")
                                  or "?" in asset["path"] or "#" in asset["path"]):
            raise invalid(f"computations[{i}].asset.path must be a non-Markdown bundle path")
        path = c["concept_id"] + ".md"
        if path in paths:
            raise invalid(f"computations[{i}] repeats a concept")
        paths.add(path)
        computations.append({"path": path, "contract": c["contract"], "asset": asset})
    return MigrationInput(args.from_, by, generated_at, args.timestamp_conflict_policy, args.timestamp_policy,
                          citations, computations), data


def migration_change_set(inp: MigrationInput, base: str, source: dict) -> ChangeSet:
    """The change set with the adapter-minted id (spec/okf/contract/write.md §2.5): sentinel digest + frozen source."""
    import json

    op = inp.operation()
    sentinel = request_digest(ChangeSet(ID_SENTINEL, ACTOR, ZERO_REVISION, (op,)))
    identity = json.dumps({"domain": "okf-mcp:v01-to-v02-migration-identity:v3", "request_digest": sentinel,
                           "resolution": source}, separators=(",", ":"), ensure_ascii=False)
    return ChangeSet("mcp-migration-" + sha256_hex(identity.encode("utf-8")), ACTOR, base, (op,))


@dataclass
class Outcome:
    writes: dict[str, bytes] = field(default_factory=dict)
    reads: set = field(default_factory=set)
    blockers: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)

    def block(self, code: str, path: str, message: str, action: str | None = None,
              span: tuple[int, int] = (0, 0)) -> None:
        """``span``: file byte offsets of the text at fault (0..0 when there is none)."""
        self.blockers.append({"code": code, "path": path, "location": {"start": span[0], "end": span[1]},
                              "message": message})
        if action:
            self.actions.append({"code": action, "path": path, "message": message})


def _same_instant(a: str, b: str) -> bool:
    try:
        return datetime.fromisoformat(a.replace("Z", "+00:00")) == datetime.fromisoformat(b.replace("Z", "+00:00"))
    except ValueError:
        return a == b


def _timestamps(path: str, doc: Document, ed: Editor, inp: MigrationInput,
                out: Outcome) -> tuple[Document, RootEdits | None]:
    """The document with ``generated`` recorded, and its edits as root edits of ``ed`` (None
    after an edit they cannot express: the next step then composes the new text)."""
    root = ed.root
    edits: RootEdits | None = RootEdits(ed)
    ts_node = lookup(root, "timestamp") if root is not None else None
    gen_node = lookup(root, "generated") if root is not None else None
    ts_span, gen_span = node_span(doc, ts_node), node_span(doc, gen_node)
    ts = scalar(ts_node[1]) if ts_node else None
    explicit = inp.generated_at.get(path)
    text = doc.frontmatter
    if gen_node is None:
        if ts is None and explicit is None:
            return doc, edits
        if ts is not None and not is_rfc3339(ts) and explicit is None:
            out.block("invalid_generated_at", path, "legacy timestamp is not RFC3339", "provide_generated_at", ts_span)
            return doc, edits
        at = explicit or ts
        if explicit and ts and is_rfc3339(ts) and not _same_instant(explicit, ts):
            if inp.conflict_policy == "reject":
                out.block("migration_blocked", path, "generated_at disagrees with the legacy timestamp", span=ts_span)
                return doc, edits
            at = explicit if inp.conflict_policy == "use_generated" else ts
        if not inp.generated_by:
            out.block("missing_generated_by", path, "a producer is needed to record generated", "provide_generated_by",
                      ts_span if ts_node else frontmatter_span(doc))
            return doc, edits
        edits = RootEdits(ed).append("generated", {"by": inp.generated_by, "at": at})
        text = edits.text()
    else:
        node = gen_node[1]
        by_entry = lookup(node, "by") if isinstance(node, MappingNode) else None
        at_entry = lookup(node, "at") if isinstance(node, MappingNode) else None
        by = scalar(by_entry[1]) if by_entry else None
        at = scalar(at_entry[1]) if at_entry else None
        if by is None or not valid_actor(by):
            out.block("missing_generated_by", path, "existing generated has no valid by", "provide_generated_by", gen_span)
            return doc, edits
        if at is None:
            out.block("missing_generated_at", path, "existing generated has no at", "provide_generated_at", gen_span)
            return doc, edits
        if not is_rfc3339(at):
            out.block("invalid_generated_at", path, "existing generated.at is not RFC3339", "provide_generated_at", gen_span)
            return doc, edits
        if ts is not None and is_rfc3339(ts) and not _same_instant(ts, at):
            if inp.conflict_policy == "reject":
                out.block("migration_blocked", path, "generated.at disagrees with the legacy timestamp", span=gen_span)
                return doc, edits
            if inp.conflict_policy == "use_timestamp":
                assert isinstance(node, MappingNode) and root is not None  # it has a valid by
                text, edits = ed.set_key(node, ed.entry_end(root, ed.nlines, "generated"), "at", ts), None
    if ts is not None and inp.timestamp_policy == "remove_after_copy":
        edits = edits.remove("timestamp") if edits is not None else None
        if edits is not None:
            text = edits.text()
        else:
            ed2 = Editor(text, doc.newline)
            assert ed2.root is not None  # the timestamp was read from this mapping
            text = ed2.delete_key(ed2.root, ed2.nlines, "timestamp")
    return Document(doc.open_line, text, doc.close_line, doc.body), edits


def _read_side(path: str, raw: bytes):
    """The read side's parse; only documents with legacy or explicit timestamps are then
    composed for editing, so an unrelated document in a shape the editor refuses (but the
    reader accepts) does not block the migration."""
    from knowspec.impl.okf.write.planner import parsed_document

    return parsed_document(path, raw)


def _split(path: str, raw: bytes, out: Outcome) -> Document | None:
    try:
        return split_document(raw)
    except DocumentError as exc:
        if exc.code == "invalid_encoding":
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                out.block("invalid_utf8", path, exc.message, "repair_invalid_utf8", (bad.start, bad.end))
            return None
        out.block("migration_document_invalid", path, exc.message, span=(0, len(raw.split(b"\n", 1)[0])))
        return None


def plan_migration(files: Mapping[str, bytes], inp: MigrationInput, check: Callable[[], None]) -> Outcome:
    """The migration's writes, blockers and advice; ``check`` (the call's cancellation) runs
    between documents."""
    out = Outcome()
    docs: dict[str, Document] = {}
    mapped = {m["path"]: m["entries"] for m in inp.citations}
    for path in list(inp.generated_at) + [c["path"] for c in inp.computations] + list(mapped):
        if path not in files:
            out.block("migration_document_missing", path, "the named document does not exist")
    for blocker in label_collisions(inp):
        out.blockers.append(blocker)
        out.actions.append({"code": "disambiguate_citation_entry", "path": blocker["path"], "message": blocker["message"]})
    for path in sorted((p for p in files if p.endswith(".md")), key=_B):
        check()
        base = path.rsplit("/", 1)[-1]
        out.reads.add(path)
        doc = _split(path, files[path], out)
        if doc is None:
            continue
        cites = "Citations" in doc.body or path in mapped
        if base in ("index.md", "log.md") or not doc.has_frontmatter:
            if cites and has_section(doc):
                out.block("unsupported_citations_document", path, "# Citations is only converted in concepts",
                          "normalize_citations_section", section_span(doc))
            docs[path] = doc
            continue
        parsed = _read_side(path, files[path])
        if parsed.parse_error is not None:
            out.block("migration_document_invalid", path, "the document does not parse", span=frontmatter_span(doc))
            continue
        original = doc
        try:
            edits: RootEdits | None = None
            if path in inp.generated_at or "timestamp" in parsed.frontmatter:
                ed = Editor(doc.frontmatter, doc.newline)  # composed once for both steps
                doc, edits = _timestamps(path, doc, ed, inp, out)
            if cites:
                doc = convert_document(path, original, doc, mapped.get(path, []), out, edits)
        except (YamlRejected, PatchRejected) as exc:
            out.block("migration_document_invalid", path, exc.message, span=frontmatter_span(original))
        docs[path] = doc
    for c in inp.computations:
        doc = docs.get(c["path"])
        if doc is None or c["path"].rsplit("/", 1)[-1] in ("index.md", "log.md"):
            continue
        try:
            docs[c["path"]] = put_attested_computation(doc, {"attested_computation": c["contract"]})
        except (PatchRejected, YamlRejected, ComputationBodyRejected) as exc:
            out.block("migration_document_invalid", c["path"], exc.message)
        if c["asset"] is not None:
            out.writes[c["asset"]["path"]] = c["asset"]["content"].encode("utf-8")
    if out.blockers:
        return out
    docs["index.md"] = set_bundle_version(docs.get("index.md"), "0.2")
    for path, doc in docs.items():
        new = doc.render().encode("utf-8")
        if files.get(path) != new:
            out.writes[path] = new
    blocking, advisory = staged_validation(files, out.writes, check=check)
    for d in blocking:
        out.block(d["code"], d["file"], d["message"])
    out.diagnostics = advisory
    return out


def build_proof(files: Mapping[str, bytes], out: Outcome, cs: ChangeSet, res_digest: str) -> dict:
    post = dict(files)
    post.update(out.writes)
    paths = sorted(out.writes, key=_B)
    refs = sorted((p[:-3] for p in paths if p.endswith(".md") and p.rsplit("/", 1)[-1] not in ("index.md", "log.md")), key=_B)
    return {"format_version": 2, "request_digest": request_digest(cs), "resolution_digest": res_digest,
            "base_revision": cs.base_revision, "result_revision": revision_of(post),
            "reads": sorted(out.reads, key=_B),
            "writes": [{"path": p, "digest": sha256_hex(out.writes[p])} for p in paths],
            "deletes": [], "renames": [], "affected_refs": refs, "reverse_impact": [],
            "changed_files": [{"kind": "write", "path": p, "from": ""} for p in paths], "changed_refs": refs}


def proof_digest(proof: dict) -> str:
    h = hashlib.sha256()
    h.update(enc_str("okf:migration-plan-proof:v2") + u64(2) + enc_str(proof["request_digest"]))
    h.update(enc_str(proof["resolution_digest"]) + enc_str(proof["base_revision"]) + enc_str(proof["result_revision"]))
    h.update(enc_strs("reads", proof["reads"]))
    h.update(enc_str("writes") + u64(len(proof["writes"])))
    for w in proof["writes"]:
        h.update(enc_str(w["path"]) + enc_str(w["digest"]))
    h.update(enc_strs("deletes", proof["deletes"]))
    h.update(enc_str("renames") + u64(len(proof["renames"])))
    for r in proof["renames"]:
        h.update(enc_str(r["from"]) + enc_str(r["to"]))
    h.update(enc_strs("affected_refs", proof["affected_refs"]) + enc_strs("reverse_impact", proof["reverse_impact"]))
    h.update(enc_str("changed_files") + u64(len(proof["changed_files"])))
    for f in proof["changed_files"]:
        h.update(enc_str(f["kind"]) + enc_str(f["path"]) + enc_str(f["from"]))
    h.update(enc_strs("changed_refs", proof["changed_refs"]))
    return "sha256:" + h.hexdigest()


def proof_is_canonical(proof: dict) -> bool:
    def ordered(items):
        keys = [_B(i) for i in items]
        return keys == sorted(set(keys))

    return (ordered(proof["reads"]) and ordered([w["path"] for w in proof["writes"]])
            and ordered(proof["deletes"]) and ordered(proof["affected_refs"])
            and ordered(proof["changed_refs"]) and ordered(proof["reverse_impact"])
            and all(is_revision_path(p) for p in proof["reads"] + [w["path"] for w in proof["writes"]]))

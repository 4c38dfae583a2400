"""Build a source pool (a SQLite file in pool schema v2) from a folder of Markdown topics.

Two kinds of folder are accepted:

* a help corpus: ``*.md`` files with YAML frontmatter (``slug``, ``title``, ``breadcrumb``,
  ``category``, ``description``, ``module``, ``collection``, ``acl``, ``links`` / ``entities``:
  ``[{kind, key, confidence, source}]``, and the shorthands ``form_class`` / ``islem_kodu``), plus
  an optional ``pool.yaml`` with collections, ``meta`` recipes, ``entity_kinds`` and
  ``entities`` (``aliases``, ``relations``);
* an OKF bundle (a ``concepts/`` folder): each concept becomes a topic; its tags become ``tag``
  entities and its ``x-llmwiki.aliases`` aliases of its ``concept`` entity.

Topics are chunked by Markdown section. The result is a pool IMPORTDOC can import, or a
``help.db`` the help tools read directly. Given a model pack (``--model DIR``), every topic and
chunk also gets a passage vector and ``doc$meta`` records the model (``vectors.pool_embed``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sqlite3
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import yaml

from knowspec.impl.docpool.fulltext.reader import sqlite_persist
from knowspec.impl.docpool.importdoc import MAX_TEXT_BYTES, stored_value_fault
from knowspec.impl.errors import ToolError
from knowspec.impl.docpool.storage.sqlite import open_for_write
from knowspec.impl.docpool.storage.staging import keep_access_of, staged
from knowspec.impl.progress import PhaseProgress, Report
from knowspec.impl.rules.fold import fold

if TYPE_CHECKING:
    from knowspec.impl.docpool.vectors.embedder import Embedder


_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+)$")  # the closing blanks and #s are cut in code (see below)
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
LINK_KINDS_SHORTHAND = ("module", "form_class", "islem_kodu")


@dataclass
class TopicSource:
    """One topic read from a Markdown file, before it is written to the pool."""

    collection: str
    slug: str
    title: str
    body_md: str
    breadcrumb: str = ""
    category: str = ""
    description: str = ""
    source_uri: str = ""
    mtime: str | None = None
    links: list[dict[str, Any]] = field(default_factory=list)
    acl: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Chunk:
    ord: int
    heading: str
    body: str


class YamlAlias(yaml.YAMLError):
    """A source's YAML names an alias (``*name``): a build refuses it, naming the file."""


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` of a source's YAML without aliases, which none needs: an alias bomb
    (each level naming the one below nine times) in a frontmatter or ``pool.yaml`` grew a build
    past 8 GB of memory."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise YamlAlias("aliases (*name) are not allowed here")
    return yaml.safe_load(text)


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """(frontmatter mapping, body) of a Markdown file; ``{}`` when there is none (a byte order
    mark before it is no reason to miss it)."""
    text = text.removeprefix("\ufeff")
    m = _FRONTMATTER.match(text)
    if not m:
        return {}, text
    try:
        data = load_yaml(m.group(1)) or {}
    except YamlAlias:
        raise  # not dropped as unreadable: the frontmatter may hold the topic's collection and ACL
    except yaml.YAMLError:
        data = {}
    return (data if isinstance(data, dict) else {}), text[m.end():]


def chunk_sections(title: str, body: str) -> list[Chunk]:
    """Split ``body`` at headings; each chunk's heading is the path of headings above it."""
    chunks: list[Chunk] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    heading = ""
    in_fence = False

    def flush() -> None:
        text = "\n".join(lines).strip()
        if text or heading:
            chunks.append(Chunk(len(chunks), heading, text))

    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            flush()
            # A lazy (.+?)[ \t#]*$ retried the closing run from every position: quadratic on a
            # heading line of spaces. The same text: the rest without its closing run, one
            # character at least.
            rest = m.group(2)
            level, text = len(m.group(1)), (rest.rstrip(" \t#") or rest[0]).strip()
            path = [(lv, t) for lv, t in path if lv < level] + [(level, text)]
            heading = " > ".join(t for _, t in path if t != title)
            lines = []
        else:
            lines.append(line)
    flush()
    return chunks or [Chunk(0, "", "")]


def _links_from(front: dict[str, Any]) -> list[dict[str, Any]]:
    links: list[dict[str, Any]] = []
    for item in list(front.get("links") or []) + list(front.get("entities") or []):
        if isinstance(item, dict) and item.get("kind") and item.get("key"):
            links.append({"kind": str(item["kind"]), "key": str(item["key"]),
                          "confidence": float(item.get("confidence", 1.0)),
                          "source": str(item.get("source", "frontmatter"))})
    for kind in LINK_KINDS_SHORTHAND:
        values = front.get(kind)
        for key in values if isinstance(values, list) else [values] if values else []:
            links.append({"kind": kind, "key": str(key), "confidence": 1.0, "source": "frontmatter"})
    return links


def _mtime(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _frontmatter_of(path: Path, root: Path) -> tuple[dict[str, Any], str]:
    where = path.relative_to(root).as_posix()
    if path.stat().st_size > MAX_TEXT_BYTES:  # read whole, then refused by IMPORTDOC anyway
        raise ToolError("invalid_request", f"{where}: over {MAX_TEXT_BYTES >> 20} MiB, a topic's cap")
    try:
        return split_frontmatter(_utf8_text(path, where))
    except YamlAlias as exc:
        raise ToolError("invalid_request", f"{where}: frontmatter: {exc}") from None


def _utf8_text(path: Path, where: str) -> str:
    """The file's text, or a refusal naming the file and the first byte that is not UTF-8."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError("invalid_request",
                        f"{where}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})") from None


def _principals(acl: Any, where: str) -> list[str]:
    """A topic's ``acl`` as principal names; anything but names refuses the build (an entry such
    as ``{x: 1}`` had become the principal "{'x': 1}", a restriction no one could read)."""
    entries = acl if isinstance(acl, list) else [acl]
    wrong = [e for e in entries if isinstance(e, bool) or not isinstance(e, (str, int)) or not str(e).strip()]
    if wrong:
        raise ToolError("invalid_request", f"{where}: acl entries must be user or role names, found {wrong[0]!r}")
    return [str(entry) for entry in entries]  # a number is a name too (acl: [1001])


def read_help_topic(path: Path, root: Path, collection: str) -> TopicSource:
    """A help topic from a Markdown file with frontmatter."""
    front, body = _frontmatter_of(path, root)
    slug = str(front.get("slug") or path.relative_to(root).with_suffix("").as_posix())
    acl = front.get("acl") or []
    return TopicSource(
        collection=str(front.get("collection") or collection), slug=slug,
        title=str(front.get("title") or slug), body_md=body.strip() + "\n",
        breadcrumb=str(front.get("breadcrumb") or ""), category=str(front.get("category") or ""),
        description=str(front.get("description") or ""),
        source_uri=str(front.get("source_uri") or path.relative_to(root).as_posix()),
        mtime=str(front["mtime"]) if front.get("mtime") else _mtime(path),
        links=_links_from(front), acl=_principals(acl, path.relative_to(root).as_posix()))


def read_okf_concept(path: Path, root: Path, collection: str) -> tuple[TopicSource, dict[str, Any]]:
    """A topic from an OKF concept file, and its concept entity (with aliases)."""
    front, body = _frontmatter_of(path, root)
    slug = path.relative_to(root / "concepts").with_suffix("").as_posix()
    title = str(front.get("title") or slug)
    tags = [str(t) for t in front.get("tags") or [] if t]
    raw_ext = front.get("x-llmwiki")
    ext: dict[str, Any] = raw_ext if isinstance(raw_ext, dict) else {}
    links = [{"kind": "concept", "key": slug, "confidence": 1.0, "source": "okf"}]
    links += [{"kind": "tag", "key": t, "confidence": 1.0, "source": "okf-tags"} for t in tags]
    topic = TopicSource(
        collection=collection, slug=slug, title=title, body_md=body.strip() + "\n",
        breadcrumb=" > ".join(["Concepts", *(tags[:1]), title]), category=str(front.get("type") or "concept"),
        description=str(front.get("description") or ""), source_uri=f"/concepts/{slug}.md",
        mtime=str(front.get("timestamp") or _mtime(path)), links=links)
    aliases = sorted({str(a) for a in ext.get("aliases") or [] if a and str(a).lower() != slug.lower()},
                     key=str.lower)
    entity = {"kind": "concept", "key": slug, "title": title,
              "attrs": {"tags": tags, "description": topic.description},
              "aliases": [{"alias": a, "confidence": float(ext.get("confidence", 1.0))} for a in aliases]}
    return topic, entity


def _load_pool_yaml(root: Path) -> dict[str, Any]:
    path = root / "pool.yaml"
    if not path.is_file():
        return {}
    try:
        data = load_yaml(_utf8_text(path, "pool.yaml")) or {}
    except yaml.YAMLError as exc:
        raise ToolError("invalid_request", f"pool.yaml is not usable YAML: {str(exc).splitlines()[0]}") from None
    return data if isinstance(data, dict) else {}


def markdown_files(folder: Path, root: Path) -> list[Path]:
    """The ``*.md`` files under ``folder`` a build reads: regular files whose real path lies
    inside ``root`` (a FIFO named ``x.md`` had hung the build; a link to ``/etc/passwd``, been a topic)."""
    real_root = root.resolve()
    return sorted(p for p in folder.rglob("*.md")
                  if p.is_file() and p.resolve().is_relative_to(real_root))


def _help_sources(root: Path, collection: str) -> Iterable[Path]:
    return [p for p in markdown_files(root, root) if p.name.lower() not in {"readme.md"}]


class _Writer:
    """Writes topics, entities and recipes into an open pool connection."""

    def __init__(self, con) -> None:
        self.con = con

    def collection(self, cid: str, title: str, kind: str, erisim: str, help_url_v3: str | None) -> None:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.con.execute('insert or replace into "doc$collection"(id, title, kind, erisim, generated, help_url_v3) '
                         "values (?, ?, ?, ?, ?, ?)", [cid, title, kind, erisim, now, help_url_v3])

    def topic(self, t: TopicSource) -> int:
        cur = self.con.execute(
            'insert into "doc$topic"(collection, slug, title, breadcrumb, category, description, '
            "source_uri, mime, mtime, body_md) values (?, ?, ?, ?, ?, ?, ?, 'text/markdown', ?, ?)",
            [t.collection, t.slug, t.title, t.breadcrumb, t.category, t.description, t.source_uri,
             t.mtime, t.body_md])
        tid = cur.lastrowid
        for link in t.links:
            self.con.execute('insert or replace into "doc$link"(topic_id, kind, key, confidence, source) '
                             "values (?, ?, ?, ?, ?)", [tid, link["kind"], link["key"], link["confidence"], link["source"]])
        for principal in t.acl:
            self.con.execute('insert or ignore into "doc$acl"(topic_id, principal) values (?, ?)', [tid, principal])
        return tid

    def chunks(self, tid: int, title: str, body_md: str) -> None:
        """The topic's sections as chunks, each indexed for full text."""
        for c in chunk_sections(title, body_md):
            cid = self.con.execute('insert into "doc$chunk"(topic_id, ord, title, heading, body) values (?, ?, ?, ?, ?)',
                                   [tid, c.ord, title, c.heading, c.body]).lastrowid
            self.con.execute('insert into "doc$chunk_fts"(rowid, title, heading, body) values (?, ?, ?, ?)',
                             [cid, fold(title), fold(c.heading), fold(c.body)])

    def entity_kind(self, collection: str, k: dict[str, Any]) -> None:
        self.con.execute('insert or replace into "doc$entity_kind"(collection, kind, title, key_rule, url_template) '
                         "values (?, ?, ?, ?, ?)", [collection, str(k["kind"]), str(k.get("title", "")),
                                                    str(k.get("key_rule", "")), str(k.get("url_template", ""))])

    def entity(self, collection: str, e: dict[str, Any]) -> None:
        kind, key = str(e["kind"]), str(e["key"])
        self.con.execute('insert or replace into "doc$entity"(collection, kind, key, title, attrs) values (?, ?, ?, ?, ?)',
                         [collection, kind, key, str(e.get("title", "")),
                          json.dumps(e.get("attrs") or {}, ensure_ascii=False, sort_keys=True)])
        for a in e.get("aliases") or []:
            a = a if isinstance(a, dict) else {"alias": a}
            self.con.execute('insert or ignore into "doc$alias"(collection, kind, alias, key, confidence) '
                             "values (?, ?, ?, ?, ?)", [collection, kind, str(a["alias"]), key,
                                                        float(a.get("confidence", 1.0))])
        for r in e.get("relations") or []:
            self.con.execute('insert or ignore into "doc$entity_rel"(collection, from_kind, from_key, rel, to_kind, to_key) '
                             "values (?, ?, ?, ?, ?, ?)", [collection, kind, key, str(r["rel"]), str(r["kind"]), str(r["key"])])

    def meta(self, collection: str, values: dict[str, Any]) -> None:
        for name, value in values.items():
            if isinstance(value, (list, tuple)):
                value = ", ".join(str(v) for v in value) if name == "search_bm25_weights" else " ".join(map(str, value))
            self.con.execute('insert or replace into "doc$meta"(collection, name, value) values (?, ?, ?)',
                             [collection, name, str(value)])


def build_pool(source_dir: Path | str, out_path: Path | str, collection: str, *, title: str = "",
               erisim: str | None = None, progress: Report | None = None,
               model_dir: Path | str | None = None) -> dict[str, int]:
    """Write a fresh pool file ``out_path`` from ``source_dir``; returns row counts.

    ``progress(phase, done, total)`` hears three phases in turn: ``topics`` (files read and
    written), ``chunking`` (topics split into indexed chunks) and, with a model, ``vectors``.

    ``collection``/``title``/``erisim`` name the main collection (``pool.yaml`` may add more,
    topics may choose one with their ``collection`` frontmatter); without ``erisim`` (or a
    title) the one ``pool.yaml`` gives the collection applies, else ``herkes``. With ``model_dir`` (a model
    pack) topic and chunk vectors are stored too; a missing pack or runtime raises the
    ``embedding_unavailable`` ToolError before anything is written.
    """
    root, out = Path(source_dir), Path(out_path)
    embedder = None
    if model_dir is not None:
        from knowspec.impl.docpool.vectors.embedder import load_embedder

        embedder = load_embedder(model_dir)
    # Written whole beside ``out`` and renamed over it: a build that fails (a refused file, a
    # full disk) leaves the pool that was there, and a server reading it sees old or new.
    with staged(out, "building") as staging:
        counts = _write_pool(root, staging, collection, title, erisim, progress, embedder)
        _empty_old_wal(out)
        keep_access_of(out, staging)
        os.replace(staging, out)
    for suffix in ("-wal", "-shm"):  # an older file's, which the new one (no WAL) must not meet
        Path(str(out) + suffix).unlink(missing_ok=True)
    return counts


def _empty_old_wal(out: Path) -> None:
    """Fold the old pool's WAL into it and empty it before the new file takes its name: SQLite
    applies a non-empty ``-wal`` it finds beside a database whatever that database is, so a reader
    opening the new pool before the old WAL is gone would read the old pool's pages on top of it.
    A WAL that cannot be emptied (a reader or writer inside it now) refuses the build."""
    wal = out.with_name(out.name + "-wal")
    if not wal.is_file() or wal.stat().st_size == 0:
        return
    con = sqlite3.connect(out.absolute().as_uri(), uri=True, timeout=5)
    try:
        busy = con.execute("pragma wal_checkpoint(truncate)").fetchone()[0]
    finally:
        con.close()
    if busy or (wal.is_file() and wal.stat().st_size):
        raise ToolError("invalid_request", f"{out.name} is being read or written in WAL mode (a server, an import): "
                        "stop it or build to another file")


def main_collection(config: dict[str, Any]) -> dict[str, Any]:
    """``pool.yaml``'s ``collection`` mapping (empty when it has none)."""
    declared = config.get("collection")
    return declared if isinstance(declared, dict) else {}


def main_erisim(erisim: str | None, config: dict[str, Any]) -> str:
    """The main collection's access: ``--erisim`` when given, else ``pool.yaml``'s, else ``herkes``."""
    return erisim or str(main_collection(config).get("erisim") or "herkes")


def _write_pool(root: Path, out: Path, collection: str, title: str, erisim: str | None,
                progress: Report | None, embedder: Embedder | None) -> dict[str, int]:
    """``build_pool``'s rows, written into the new file ``out``."""
    config = _load_pool_yaml(root)
    okf = (root / "concepts").is_dir()
    con = open_for_write(out)
    w = _Writer(con)
    try:
        con.execute("begin")
        main = main_collection(config)
        w.collection(collection, title or str(main.get("title") or collection),
                     str(main.get("kind") or ("okf" if okf else "help")), main_erisim(erisim, config),
                     main.get("help_url_v3"))
        for extra in config.get("collections") or []:
            w.collection(str(extra["id"]), str(extra.get("title", extra["id"])), str(extra.get("kind", "help")),
                         str(extra.get("erisim", "herkes")), extra.get("help_url_v3"))
        w.meta("", config.get("meta") or {})
        for cid, values in (config.get("collection_meta") or {}).items():
            w.meta(str(cid), values or {})
        for k in config.get("entity_kinds") or []:
            w.entity_kind(str(k.get("collection") or collection), k)
        for e in config.get("entities") or []:
            w.entity(str(e.get("collection") or collection), e)
        files = markdown_files(root / "concepts", root) if okf else list(_help_sources(root, collection))
        if okf:
            w.entity_kind(collection, {"kind": "concept", "title": "Concept", "key_rule": "OKF concept path"})
            w.entity_kind(collection, {"kind": "tag", "title": "Tag", "key_rule": "OKF tag"})
        report = progress or (lambda phase, done, total: None)
        tags: set[str] = set()
        report("topics", 0, len(files))
        for n, path in enumerate(files, 1):
            if okf:
                topic, entity = read_okf_concept(path, root, collection)
                w.entity(collection, entity)
                tags.update(l["key"] for l in topic.links if l["kind"] == "tag")
            else:
                topic = read_help_topic(path, root, collection)
            w.topic(topic)
            report("topics", n, len(files))
        for tag in sorted(tags):
            w.entity(collection, {"kind": "tag", "key": tag, "title": tag})
        # Chunks are written after all topics, in topic order: the same ids as writing them
        # topic by topic, and a phase of its own for the progress display.
        topic_count = con.execute('select count(*) from "doc$topic"').fetchone()[0]
        report("chunking", 0, topic_count)
        rows = con.execute('select id, title, body_md from "doc$topic" order by id')
        for n, (tid, topic_title, body_md) in enumerate(rows, 1):
            w.chunks(tid, topic_title, body_md)
            report("chunking", n, topic_count)
        for (cid,) in con.execute('select id from "doc$collection" order by id').fetchall():
            fault = stored_value_fault(con, cid)
            if fault is not None:  # what IMPORTDOC would refuse, and the served pool choke on (before any vector is computed)
                raise ToolError("invalid_request", f"the pool would hold {fault} in collection {cid}")
        if embedder is not None:
            from knowspec.impl.docpool.vectors.pool_embed import embed_pool

            recipe = config.get("meta") or {}
            chunk_count = con.execute('select count(*) from "doc$chunk"').fetchone()[0]
            report("vectors", 0, topic_count + chunk_count)
            embed_pool(con, embedder, passage_prefix=recipe.get("vec_passage_prefix"),
                       query_prefix=recipe.get("vec_query_prefix"),
                       progress=lambda done, total: report("vectors", done, total))
        report("full-text arrays", 0, 1)
        sqlite_persist(con)  # the served help pool loads them at its first search
        report("full-text arrays", 1, 1)
        con.execute("commit")
        counts = {name: con.execute(f'select count(*) from "doc${name}"').fetchone()[0]
                  for name in ("topic", "chunk", "entity", "alias", "link", "acl", "topic_vec", "chunk_vec")}
    except BaseException:
        if con.in_transaction:
            con.execute("rollback")
        raise
    finally:
        # A built pool is shipped (help.db) and opened read-only, possibly from a read-only
        # folder: leave it in rollback-journal mode so readers need no -wal/-shm files.
        con.execute("pragma wal_checkpoint(truncate)")
        con.execute("pragma journal_mode = delete")
        con.close()
    return counts


DEFAULT_PACK = Path("<APPDIR>/models/e5-int8")  # `--model` given without a folder


def add_pool_build_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Mount ``knowspec pool build`` (the lead adds it under the ``pool`` command)."""
    p = subparsers.add_parser("build", help="build a source pool (SQLite, schema v2) from Markdown topics or an OKF bundle")
    from knowspec.impl.cli_args import collection_name, existing_dir

    p.add_argument("source", type=existing_dir, help="folder of Markdown help topics, or an OKF bundle")
    p.add_argument("out", type=Path, help="pool file to write (replaced); a bare file name is written into APPDIR")
    p.add_argument("--collection", required=True, type=collection_name,
                   help="collection id: lower-case letters, digits and '-' (^[a-z0-9][a-z0-9-]*$)")
    p.add_argument("--title", default="", help="collection title")
    p.add_argument("--erisim", default=None,
                   help="'herkes' (everyone) or a restricted marker (document pools only: the help pool is public); "
                        "default: the collection's erisim in the folder's pool.yaml, else 'herkes'")
    p.add_argument("--model", type=existing_dir, nargs="?", const=DEFAULT_PACK, default=None,
                   help="model pack folder (model_int8.onnx + tokenizer.json): also store topic and chunk vectors "
                        "(without a folder: APPDIR/models/e5-int8, where `knowspec model build` writes)")
    p.add_argument("--appdir", type=Path, help="the server's ${APPDIR} (default: $KNOWSPEC_APPDIR or ./.knowspec)")
    p.set_defaults(func=_run_build)
    return p


def help_pool_marker_refusal(out: Path, collection: str, erisim: str | None, source_dir: Path) -> str | None:
    """Why a restricted access marker cannot be given to this build, or ``None``.

    The help pool (collection ``netsim-help``, or a file named ``help.db``) is public by design:
    the help tools read it without any authorization check, as the seed does, so a restricted
    marker there would only look like a protection that nothing applies.
    """
    from knowspec.impl.docpool.pools import HELP_COLLECTION

    if collection != HELP_COLLECTION and Path(out).name != "help.db":
        return None
    config = _load_pool_yaml(Path(source_dir)) if Path(source_dir).is_dir() else {}
    chosen = main_erisim(erisim, config)
    markers = [("--erisim" if erisim else "the collection in pool.yaml", chosen)] if chosen != "herkes" else []
    markers += [(f"collection {c.get('id')} in pool.yaml", str(c["erisim"])) for c in config.get("collections") or []
                if isinstance(c, dict) and c.get("erisim") not in (None, "herkes")]
    if not markers:
        return None
    where, marker = markers[0]
    return (f"{where}: the restricted marker {marker!r} cannot apply to the help pool, which every caller "
            "reads without an authorization check (it is public by design); build a document pool and "
            "import it into a database (IMPORTDOC) to restrict topics")


def unenforced_acls(pool: Path) -> dict[str, int]:
    """Per collection open to everyone (``erisim = herkes``), how many of its topics name an ACL
    other than ``*``: by the seed's rule such a collection allows every topic, so those ACLs
    restrict nothing (a hostile-caller review read a topic marked ``acl: [Muhasebe]`` from the
    demo's public help pool, as the rule says it may)."""
    with contextlib.closing(sqlite3.connect(pool)) as con:
        rows = con.execute('select t.collection, count(distinct t.id) from "doc$topic" t '
                           'join "doc$acl" a on a.topic_id = t.id '
                           'join "doc$collection" c on c.id = t.collection '
                           "where c.erisim = 'herkes' and a.principal <> '*' group by t.collection order by 1")
        return {str(cid): int(n) for cid, n in rows}


def _run_build(ns: argparse.Namespace) -> int:
    from knowspec.impl.cli_args import UsageError
    from knowspec.impl.config import Settings

    settings = Settings()
    if getattr(ns, "appdir", None):
        settings.appdir = ns.appdir.absolute()
    out = settings.in_appdir(ns.out)
    if out.is_dir():
        raise UsageError(f"is a folder, expected a file name: {ns.out}")
    model = settings.model_dir if ns.model is DEFAULT_PACK else ns.model
    try:
        refusal = help_pool_marker_refusal(out, ns.collection, ns.erisim, ns.source)
    except ToolError as exc:  # pool.yaml unreadable
        print(f"pool build failed: {exc.message}", file=sys.stderr)
        return 1
    if refusal:
        print(f"pool build: {refusal}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with PhaseProgress("pool build") as report:
            counts = build_pool(ns.source, out, ns.collection, title=ns.title, erisim=ns.erisim,
                                progress=report, model_dir=model)
    except ToolError as exc:
        detail = "; ".join(d["message"] for d in exc.diagnostics)
        print(f"pool build failed: {exc.message}" + (f" ({detail})" if detail else ""), file=sys.stderr)
        return 1
    if not counts["topic"]:
        print(f"pool build: warning: no Markdown topics found in {ns.source}", file=sys.stderr)
    for cid, n in unenforced_acls(out).items():
        print(f"pool build: warning: collection {cid} is open to everyone (erisim herkes), so the acl of {n} "
              "topic(s) in it restricts nothing; give a document pool's collection a restricted --erisim (or "
              "pool.yaml erisim) to apply them, and keep restricted topics out of the help pool, which is public",
              file=sys.stderr)
    print(f"wrote {out}", file=sys.stderr)
    print(json.dumps(counts, sort_keys=True))
    return 0

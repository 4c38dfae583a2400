"""The bundle model: one immutable snapshot of a bundle and its concepts (public API).

Other modules (search, sections, neighbours, graph, tools) build on exactly this surface:

- :func:`load_snapshot` pins ``bundle_path``, captures the files (reusing the process-wide cache
  after revalidating every file), parses concepts, and raises ``ToolError`` for load failures.
- :class:`Snapshot`: ``concepts`` (id → :class:`Concept`, iterates in byte-wise id order),
  ``files`` (relative path → raw bytes, every captured file; a captured snapshot re-reads them
  on demand, verified, ``bundle.captured_files``), ``revision``, ``parse_errors``,
  ``require_parseable()``, ``version()``, ``navigation()``, ``relations()``.
- :class:`Concept`: parsed lazily and cached per file identity, so an unchanged file is never
  re-parsed on a later call.

A call answers from ONE snapshot: take it once at the start of the handler and use only it.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterator, Mapping, cast

from knowspec.generated.constants import TEMPORAL_PROFILE_DATE
from knowspec.impl import runtime as process
from knowspec.impl.okf.concept import ids as _ids
from knowspec.impl.okf.parsing.frontmatter import (
    FrontmatterError,
    YamlMap,
    decode_utf8,
    document_spans,
    load_yaml_mapping,
)
from knowspec.impl.okf.parsing.links import NavLink, TargetMemo, resolve_navigation, resolve_target_ids
from knowspec.impl.okf.parsing.markdown import (
    BodyAnalysis,
    Heading,
    analyse_body,
    link_targets_without_parse,
    links_without_parse,
)
from knowspec.impl.okf.concept.relations import Relation, collect_relations, declared_fragments
from knowspec.impl.okf.bundle.captured_files import CapturedFiles, digest_of
from knowspec.impl.okf.bundle.captured_files import FileRecord as CapturedFile
from knowspec.impl.okf.layered_map import LayeredMap, flat
from knowspec.impl.okf.parsing.typed import read_str, read_tags

__all__ = [
    "Concept",
    "Document",
    "Heading",
    "NavEdge",
    "NavLink",
    "ParseError",
    "Relation",
    "RelationEdge",
    "Snapshot",
    "load_snapshot",
]


class _NotMade:
    """The one placeholder of a :class:`kept_property` value not made yet (copies and
    unpickling give it back, not another)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<not made yet>"

    def __reduce__(self) -> str:
        return "_NOT_MADE"


_NOT_MADE: Any = _NotMade()


class kept_property:
    """``functools.cached_property`` whose name every instance's ``__dict__`` holds from
    ``__init__`` on (:func:`_seed_kept`, as not made yet): all documents then insert the same
    keys in the same order and share one key table (a split dict). A ``cached_property``'s keys
    come later, in each reader's order, and gave each concept its own table (databricks-okf:
    2.2 MiB). A data descriptor, so that the seed is never read as the value."""

    def __init__(self, make: Any) -> None:
        self.make = make
        self.name = make.__name__
        self.__doc__ = make.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        kept = obj.__dict__
        value = kept.get(self.name, _NOT_MADE)
        if value is _NOT_MADE:
            value = kept[self.name] = self.make(obj)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value


def _kept_names(cls: type) -> tuple[str, ...]:
    """The :class:`kept_property` names of ``cls`` and its bases, bases' first."""
    return tuple(dict.fromkeys(name for klass in reversed(cls.__mro__) for name, value in vars(klass).items()
                               if isinstance(value, kept_property)))


def _seed_kept(obj: Any, names: tuple[str, ...]) -> None:
    """Give ``obj`` each of ``names``, not made yet (see :class:`kept_property`)."""
    kept = obj.__dict__
    for name in names:
        kept[name] = _NOT_MADE


@dataclass(frozen=True)
class ParseError:
    """A per-file parse failure. ``code``: invalid_encoding | unterminated_frontmatter |
    invalid_frontmatter | operation_rejected; ``message``: the parser's text (e.g.
    ``invalid frontmatter: yaml: line 1: …``)."""

    file: str
    code: str
    message: str


class Document:
    """One captured Markdown file (concept, index or log), parsed on first use.

    Attributes:
        path: bundle-relative slash path (``ops/retry.md``).
        raw: the captured bytes, exactly (in hand until the snapshot releases them, then
            re-read from the file and verified against the captured digest).
        parse_error: :class:`ParseError` or ``None``.
        has_frontmatter: the first line is ``---`` and a closing ``---`` exists.
        frontmatter_yaml: exact text between the delimiters (``""`` without frontmatter).
        frontmatter: the loaded mapping (:class:`YamlMap`; scalars are ``str`` for ``!!str``,
            else ``frontmatter.YamlScalar`` with ``.tag``/``.value``); ``{}`` on error. Loaded
            again from the bytes when asked, not kept (see :attr:`frontmatter`).
        body: Markdown after the frontmatter (spec/okf/contract/read.md §1.3), or the whole text without frontmatter;
            ``""`` when the document failed to parse.
        body_start_line: 1-based file line of the body's first line.
        markdown: :class:`markdown.BodyAnalysis` of the body (headings, links, footnotes,
            code and prose spans), computed lazily.
    """

    _kept_property_names: tuple[str, ...] = ()  # its kept_property names (set below the classes)

    def __init__(self, path: str, raw: bytes) -> None:
        self.path = path
        self._raw: bytes | None = raw
        self._file: CapturedFile | None = None
        self.parse_error: ParseError | None = None
        self.has_frontmatter = False
        self.body_start_line = 1
        self._spans = _NO_SPANS  # byte ranges of frontmatter_yaml and body in raw
        _seed_kept(self, self._kept_property_names)
        try:
            text = decode_utf8(raw)
            spans = document_spans(text)
            frontmatter = YamlMap() if spans is None else load_yaml_mapping(text[spans[0]:spans[1]])
        except FrontmatterError as exc:
            self.parse_error = ParseError(path, exc.code, exc.message)
            return
        if spans is None:
            self._spans = (0, 0, 0, len(raw))  # the whole text is the body
        else:
            self.has_frontmatter = True
            self.body_start_line = spans[4]
            self._spans = _byte_spans(raw, text, spans)
        self._keep_from(frontmatter)

    def _keep_from(self, frontmatter: YamlMap) -> None:
        """Keep, from the mapping loaded at capture, what every call reads: an index or a log
        keeps the mapping itself (a bundle has few, and the root index's is read on every call,
        for the bundle's version); a concept keeps values made from it."""
        self._kept_frontmatter = frontmatter

    @property
    def frontmatter(self) -> YamlMap:
        """The frontmatter mapping. A concept's is loaded again from the bytes (the same text
        gives the same mapping) and remembered only for this thread's last few documents: a
        whole-bundle pass asks each document several times in a row. Kept for every concept, the
        mappings were 7.7 MiB of databricks-okf's live objects, for readers that run once per
        revision (cards, validation, graph renders) and whose results are kept anyway."""
        if self.parse_error is not None or not self.has_frontmatter:
            return YamlMap()
        kept = self.__dict__.get("_kept_frontmatter")
        if kept is not None:
            return kept
        recent = _recent_frontmatters.documents
        for held, mapping in recent:
            if held() is self:
                return mapping
        start, end = self._spans[0], self._spans[1]
        mapping = load_yaml_mapping(self.raw[start:end].decode("utf-8"))
        recent.insert(0, (weakref.ref(self), mapping))
        del recent[RECENT_FRONTMATTERS:]
        return mapping

    @property
    def raw(self) -> bytes:
        """The captured bytes: in hand until the snapshot releases them, then re-read from the
        file and served only if they hash the same (``bundle.captured_files``)."""
        raw = self._raw
        return raw if raw is not None else self._file.read()  # type: ignore[union-attr]

    @contextmanager
    def bytes_in_hand(self) -> Iterator[None]:
        """Read the released bytes once for a reader that cuts the body or frontmatter text from
        them several times (a graph render: links, citations, flags), and release them after."""
        if self._raw is not None or self._file is None:
            yield
            return
        self._raw = self._file.read()
        try:
            yield
        finally:
            self._raw = None

    def attach(self, record: CapturedFile) -> None:
        """Tie this document to its captured file, so that its bytes can be released."""
        self._file = record

    def release_bytes(self) -> None:
        """Drop the bytes in hand (a document without its file keeps them)."""
        if self._file is not None:
            self._raw = None

    def holds_releasable_bytes(self) -> bool:
        """Its bytes are in hand and could be re-read from its file."""
        return self._raw is not None and self._file is not None

    def sha256(self) -> str:
        """Hex SHA-256 of the captured bytes (the kept digest when the file is attached)."""
        if self._file is not None:
            return self._file.digest.hex()
        return hashlib.sha256(self.raw).hexdigest()

    # The texts are cut from ``raw`` on each use rather than kept: a bundle's decoded bodies
    # would double or quadruple its bytes in memory (non-ASCII text is 2-4 bytes a character).
    @property
    def frontmatter_yaml(self) -> str:
        start, end = self._spans[0], self._spans[1]
        return self.raw[start:end].decode("utf-8") if end > start else ""

    def frontmatter_may_hold(self, word: bytes) -> bool:
        """Whether the frontmatter text holds ``word`` or a backslash: a key or value that reads
        ``word`` is spelled out, or written with escapes. False tells, without loading the
        mapping, that no key of it is ``word``."""
        start, end = self._spans[0], self._spans[1]
        raw = self.raw
        return raw.find(word, start, end) >= 0 or raw.find(b"\\", start, end) >= 0

    @property
    def body(self) -> str:
        start, end = self._spans[2], self._spans[3]
        return self.raw[start:end].decode("utf-8") if end > start else ""

    @property
    def body_bytes(self) -> bytes:
        """The body's UTF-8 bytes, cut from ``raw`` (no decoding)."""
        return self.raw[self._spans[2]:self._spans[3]]

    @property
    def text(self) -> str:
        """The whole file as text (``""`` when it is not valid UTF-8)."""
        try:
            return self.raw.decode("utf-8")
        except UnicodeDecodeError:
            return ""

    @kept_property
    def markdown(self) -> BodyAnalysis:
        with process.current().gc_paused():
            return analyse_body(self.body, self.body_start_line, source=_DocumentBody(self))

    def kept_markdown(self) -> BodyAnalysis | None:
        """:attr:`markdown` if a reader made it, else None (nothing is made)."""
        analysis = self.__dict__.get("markdown", _NOT_MADE)
        return None if analysis is _NOT_MADE else analysis

    @property
    def headings(self) -> list[Heading]:
        """Headings in document order: ``level``, ``text``, ``anchor`` (Goldmark ID), ``line``."""
        return self.markdown.headings

    def passing_analysis(self) -> BodyAnalysis:
        """:attr:`markdown` when a reader already made it, else one made for this use and not kept:
        for a reader inside a build whose result is kept per snapshot revision (the graph renders).
        An analysis kept from the middle of such a build sits among its transient objects and
        keeps their freed memory resident (Python returns an arena only once it is empty)."""
        analysis = self.kept_markdown()
        if analysis is None:
            with process.current().gc_paused():
                analysis = analyse_body(self.body, self.body_start_line, source=_DocumentBody(self))
        return analysis


class Concept(Document):
    """A concept document (every ``.md`` except ``index.md`` / ``log.md``).

    Attributes beyond :class:`Document`:
        id: canonical concept ID (path without ``.md``).
        type, title, description, resource: typed string reads (non-blank ``!!str``, key not
            duplicated) or ``None``.
        tags: the valid tag strings (``[]`` when absent or invalid).
        links: navigation links of the body (:class:`links.NavLink`: ``target``, ``kind`` =
            anchor|external|absolute|relative|other, ``target_id`` or ``None`` when unresolved,
            ``fragment``, ``line``). Existence is judged by :meth:`Snapshot.navigation`.
        relations: typed ``relations`` edges (:class:`relations.Relation`: ``from_ref``,
            ``to_ref`` escaped as the contract writes them, ``relation_type``, ``target_id``,
            ``target_fragment``). Existence is judged by :meth:`Snapshot.relations`.
        fragments: ``id``/``anchor`` values declared by nested mappings (relation targets).
    """

    def __init__(self, concept_id: str, path: str, raw: bytes) -> None:
        self.id = concept_id
        super().__init__(path, raw)

    def _keep_from(self, frontmatter: YamlMap) -> None:
        """The typed fields and the relations every tool reads, made while the mapping is in
        hand (made later, each would load the frontmatter again)."""
        self.type = read_str(frontmatter, "type")
        self.title = read_str(frontmatter, "title")
        self.description = read_str(frontmatter, "description")
        self.resource = read_str(frontmatter, "resource")
        self.tags = read_tags(frontmatter)
        self.relations = self._relations_of(frontmatter)

    @kept_property
    def type(self) -> str | None:
        return read_str(self.frontmatter, "type")

    @kept_property
    def title(self) -> str | None:
        return read_str(self.frontmatter, "title")

    @kept_property
    def description(self) -> str | None:
        return read_str(self.frontmatter, "description")

    @kept_property
    def resource(self) -> str | None:
        return read_str(self.frontmatter, "resource")

    @kept_property
    def tags(self) -> list[str]:
        return read_tags(self.frontmatter)

    @property
    def links(self) -> list[NavLink]:
        """Made on each use, not kept: their readers (the edge index, the graph renders) run
        once per snapshot revision and keep what they derive, while a bundle has tens of
        thousands of links."""
        analysis = self.kept_markdown()
        if analysis is None:
            # The first get_neighbors reads every concept's links: a body whose link lines
            # cannot touch code or HTML gives them without the Markdown parse, which waits for
            # a reader of headings, fences or footnotes.
            raw = links_without_parse(self.body, self.body_start_line)
            if raw is not None:
                return resolve_navigation(self.id, raw)
            analysis = self.markdown
        return resolve_navigation(self.id, analysis.links)

    def link_target_ids(self, memo: TargetMemo | None = None) -> list[str | None]:
        """The ``target_id`` of each of :attr:`links`, in body order (what the edge index reads);
        ``memo``: a whole-bundle build's own (``links.resolve_target_ids``)."""
        analysis = self.kept_markdown()
        targets = None if analysis is not None else link_targets_without_parse(self.body)
        if targets is None:
            targets = self.markdown.link_targets
        return resolve_target_ids(self.id, targets, memo)

    @kept_property
    def relations(self) -> list[Relation]:
        return self._relations_of(self.frontmatter)

    def _relations_of(self, frontmatter: YamlMap) -> list[Relation]:
        if not self.frontmatter_may_hold(b"relations"):
            return []  # skip the walk through every nested mapping, most of a bundle's frontmatter
        return collect_relations(self.id, frontmatter)

    @kept_property
    def fragments(self) -> dict[str, int]:
        return declared_fragments(self.frontmatter)

    def sources(self, profile: str = TEMPORAL_PROFILE_DATE) -> list[dict[str, Any]]:
        """Valid ``sources[]`` entries under ``profile`` (read_concept item shape)."""
        from knowspec.impl.okf.concept.projection import valid_sources

        return valid_sources(self, profile)

    def __repr__(self) -> str:
        return f"Concept({self.id!r})"


Document._kept_property_names = _kept_names(Document)
Concept._kept_property_names = _kept_names(Concept)
RECENT_FRONTMATTERS = 4  # documents whose mapping a thread remembers (Document.frontmatter)


class _RecentFrontmatters(threading.local):
    def __init__(self) -> None:
        self.documents: list[tuple[weakref.ref, YamlMap]] = []


_recent_frontmatters = _RecentFrontmatters()


@dataclass(frozen=True)
class NavEdge:
    """A navigation link of ``source`` with ``exists`` judged against the snapshot."""

    source: str
    link: NavLink
    exists: bool


@dataclass(frozen=True)
class RelationEdge:
    """A relation of ``source`` with ``target_exists`` judged against the snapshot."""

    source: str
    relation: Relation
    target_exists: bool


class ConceptMap(Mapping[str, Concept]):
    """id → Concept; iteration is byte-wise id order."""

    def __init__(self, concepts: dict[str, Concept]) -> None:
        self._by_id: Mapping[str, Concept] = {cid: concepts[cid] for cid in sorted(concepts)}

    @classmethod
    def ordered(cls, concepts: Mapping[str, Concept]) -> "ConceptMap":
        """A map of ``concepts``, already in id order (not sorted again); a layered map stays
        layered until something iterates it."""
        new = cls.__new__(cls)
        new._by_id = concepts
        return new

    def __getitem__(self, key: str) -> Concept:
        return self._by_id[key]

    def __iter__(self) -> Iterator[str]:
        # the first iteration makes the one dict, which lookups then read directly
        self._by_id = by_id = flat(self._by_id)
        return iter(by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, key: object) -> bool:
        return key in self._by_id


class Snapshot:
    """One captured, immutable view of a bundle.

    Attributes:
        root: the pinned absolute root path.
        files: relative path → raw bytes for every captured file (assets included); for a
            captured snapshot a :class:`CapturedFiles` (kept digests, bytes re-read when asked).
        documents: relative path → :class:`Document` for every ``.md`` file (indexes, logs and
            concepts; concepts are :class:`Concept`).
        concepts: :class:`ConceptMap` id → :class:`Concept`, including unparseable concepts
            (their ``parse_error`` is set; call :meth:`require_parseable` first).
        indexes / logs: relative path → :class:`Document` for reserved files.
        parse_errors: concept parse errors, sorted by file.
        revision: hex SHA-256 over every (path, SHA-256 of its bytes), in path order.
        scanned_files: number of captured ``.md`` files.
    """

    def __init__(self, root: str, files: Mapping[str, bytes], documents: dict[str, Document]):
        self.root = root
        # Captured files come in path order and keep records, not bytes; a plain mapping is copied.
        self.files = files if isinstance(files, CapturedFiles) else {path: files[path] for path in sorted(files)}
        self.documents: Mapping[str, Document] = {path: documents[path] for path in sorted(documents)}
        concepts: dict[str, Concept] = {}
        self.indexes: dict[str, Document] = {}
        self.logs: dict[str, Document] = {}
        for path, doc in documents.items():
            if isinstance(doc, Concept):
                concepts[doc.id] = doc
            elif path.rsplit("/", 1)[-1] == "index.md":
                self.indexes[path] = doc
            else:
                self.logs[path] = doc
        self.concepts = ConceptMap(concepts)
        self.parse_errors: list[ParseError] = sorted(
            (c.parse_error for c in concepts.values() if c.parse_error is not None),
            key=lambda e: e.file,
        )
        self.scanned_files = len(documents)
        self.derived_from: tuple[Mapping[str, bytes], frozenset[str]] | None = None
        self.holding: list[Document] = []  # documents whose bytes are still in hand

    def release_bytes(self) -> None:
        """Let the documents parsed at capture drop their bytes (they re-read them when asked)."""
        holding, self.holding = self.holding, []
        for document in holding:
            document.release_bytes()

    def replaced(self, files: Mapping[str, bytes] | Mapping[str, CapturedFile], documents: dict[str, Document]
                 ) -> "Snapshot":
        """This snapshot with the bytes of some of its files, and the parses of those that are
        documents, replaced. The file set is the same, so every order is kept: a change costs
        the changed files, not a re-sort of the bundle."""
        new = object.__new__(Snapshot)
        new.root = self.root
        if isinstance(self.files, CapturedFiles):
            new.files = self.files.replaced({p: self.files_record(files, p) for p in files})
        else:
            new.files = {**self.files, **cast("Mapping[str, bytes]", files)}
        new.documents = LayeredMap(self.documents, documents)
        new.indexes = {p: documents.get(p, d) for p, d in self.indexes.items()}
        new.logs = {p: documents.get(p, d) for p, d in self.logs.items()}
        new.concepts = ConceptMap.ordered(LayeredMap(
            self.concepts._by_id, {d.id: d for d in documents.values() if isinstance(d, Concept)}))
        new.parse_errors = sorted(
            [e for e in self.parse_errors if e.file not in documents]
            + [d.parse_error for d in documents.values() if isinstance(d, Concept) and d.parse_error is not None],
            key=lambda e: e.file,
        )
        new.scanned_files = self.scanned_files
        new.derived_from = (self.files, frozenset(files))  # whose files, and which of them changed
        new.holding = []
        return new

    @staticmethod
    def files_record(files: Mapping[str, Any], path: str) -> CapturedFile:
        record = files[path]
        if not isinstance(record, CapturedFile):
            raise TypeError("a captured snapshot is replaced with file records")
        return record

    @cached_property
    def revision(self) -> str:
        """Hex SHA-256 over every captured path and its content's SHA-256, in path order (from
        the kept digests: no file is read again)."""
        digest = hashlib.sha256()
        for path in self.files:
            encoded = path.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "big") + encoded)
            digest.update(digest_of(self.files, path))
        return digest.hexdigest()

    @property
    def root_index(self) -> Document | None:
        return self.indexes.get("index.md")

    def require_parseable(self) -> None:
        """Raise the spec/okf/contract/read.md §4.3 parse-error envelope when any concept failed to parse."""
        from knowspec.impl.okf.read_errors import parse_failure

        if self.parse_errors:
            raise parse_failure(self.parse_errors)

    def version(self, selector: str | None = None):
        """Resolve the bundle version (``version.VersionResolution``); ``selector`` is 0.1/0.2."""
        from knowspec.impl.okf.bundle.version import resolve_version

        return resolve_version(self.root_index, selector)

    def navigation_targets(self, concept_id: str, memo: TargetMemo | None = None) -> list[tuple[str, bool]]:
        """``(target_id, exists)`` of :meth:`navigation`'s edges, without a record per link
        (``memo``: a whole-bundle build's own, ``links.resolve_target_ids``)."""
        concepts = self.concepts
        return [(target, target in concepts) for target in concepts[concept_id].link_target_ids(memo)
                if target is not None]

    def navigation(self, concept_id: str) -> list[NavEdge]:
        """Resolved navigation links of one concept, in body order, with existence."""
        concept = self.concepts[concept_id]
        return [
            NavEdge(concept_id, link, link.target_id in self.concepts)
            for link in concept.links
            if link.target_id is not None
        ]

    def relations(self, concept_id: str) -> list[RelationEdge]:
        """Syntactically valid relations of one concept with target existence (spec/okf/contract/read.md §1.7)."""
        concept = self.concepts[concept_id]
        out = []
        for rel in concept.relations:
            target = self.concepts.get(rel.target_id)
            exists = target is not None and (
                rel.target_fragment is None or target.fragments.get(rel.target_fragment, 0) == 1
            )
            out.append(RelationEdge(concept_id, rel, exists))
        return out


_NO_SPANS = (0, 0, 0, 0)


class _DocumentBody:
    """A body analysis's source: the document's body, cut from its bytes on each use (so the
    analysis, kept for the snapshot's life, never holds the file's bytes)."""

    __slots__ = ("document",)

    def __init__(self, document: Document) -> None:
        self.document = document

    def __call__(self) -> str:
        return self.document.body


def _byte_spans(raw: bytes, text: str, spans: tuple[int, int, int, int, int]) -> tuple[int, int, int, int]:
    """(frontmatter start, end, body start, end) in ``raw`` of the character ``spans`` of its
    ``text`` (:func:`document_spans`).

    What lies around them (the ``---`` lines, the newlines the split drops) is ASCII, so byte
    and character counts differ only inside the frontmatter and the body themselves: the body's
    end is counted back from the file's end, and only the frontmatter is measured in UTF-8."""
    fm_start, fm_end, body_start, body_end, _ = spans
    if len(raw) == len(text):  # ASCII: a byte a character
        return fm_start, fm_end, body_start, body_end
    fm_end_byte = fm_start + _utf8_length(text[fm_start:fm_end])
    return fm_start, fm_end_byte, fm_end_byte + body_start - fm_end, len(raw) - (len(text) - body_end)


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def document_for(path: str, raw: bytes) -> Document:
    """Build the right Document kind for a captured ``.md`` path."""
    base = path.rsplit("/", 1)[-1]
    if base in ("index.md", "log.md"):
        return Document(path, raw)
    return Concept(_ids.concept_id_from_path(path), path, raw)


def load_snapshot(bundle_path: str, ctx) -> Snapshot:
    """Pin the root, capture (or revalidate) every file, parse concepts; ``ToolError`` on failure."""
    from knowspec.impl.okf.bundle.snapshot import capture_snapshot

    return capture_snapshot(bundle_path, ctx)

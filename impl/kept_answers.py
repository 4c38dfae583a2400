"""Successful answers kept, once validated, for tools whose answer is a function of a key the
handler names (a snapshot's root and arguments, stamped with its revision).

Why: a warm list_concepts or get_semantic_graph would otherwise build, validate and encode the
same megabytes of JSON on every call (databricks-okf: 75-90 ms and 400-500 ms of server time a
call, several times the ``json.dumps`` of the answer). The handler asks for its kept answer
first (:func:`kept_output`); on a miss it answers as usual and names the key
(``ToolOutput.keep``), and the pipeline keeps the answer's text and structured JSON only after
the answer passed its output schema. A kept answer is therefore always one that was validated.
Both are held as the JSON the transports write, LZ4-compressed (a few MiB of JSON compress
several times; decompressing is a few milliseconds), a big one in a nameless temporary file, so
a kept answer is neither decoded nor encoded again on its way out (``server/parked_answers``).
get_semantic_graph's answer is too big to hold as values even once: its handler checks it node
by node against the output schema as it writes it (``CallContext.output_items_check``) and keeps
the ``KeptAnswer`` with its snapshot's derived values.

A refusal that is as much a function of the key is kept too (:func:`keep_refusal`): a strict
validation of databricks-okf checks for 1.5 s and then refuses (``resource_limit``, over 10,000
diagnostics), and the same snapshot would be refused again after the same work.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

import lz4.block

from knowspec.impl import nameless_files, runtime as process
from knowspec.impl.context import AnswerKey, ToolOutput
from knowspec.impl.errors import ToolError
from knowspec.impl.rules.sliced_json import json_pieces

MAX_KEPT_ANSWERS = 16  # answers kept, all tools and roots together (least recently used out)
MAX_KEPT_REFUSALS = 16
# A kept answer this big, compressed, goes to a nameless temporary file; a smaller one would cost
# a file descriptor and two system calls to save less than a page of memory.
SPILL_MIN_BYTES = 64 << 10


class KeptAnswer:
    """A validated success answer as its JSON on the wire: the text as a JSON string
    (``text_json``) and the structured content as a JSON object (``structured_json``), both
    compact UTF-8 with non-ASCII kept, held compressed; from ``SPILL_MIN_BYTES`` compressed, in a
    nameless temporary file (:mod:`knowspec.impl.nameless_files`) where one can be written.

    Why a file: a kept answer is read only when its tool is asked again, and the big ones are
    among the largest things a server keeps besides its bundle and index (databricks-okf:
    get_semantic_graph's 2.6 MiB and list_concepts' 0.6 MiB compressed, in a server of about
    100 MiB). The page cache holds them there, reclaimable; reading one back is a ``pread`` of
    those bytes beside a decompression of several times as many."""

    __slots__ = ("_pieces", "_file", "_text_bytes", "__weakref__")
    _pieces: tuple[bytes, bytes] | int  # in memory, or the bytes of both in ``_file``
    _file: nameless_files.NamelessFile | None

    def __init__(self, text_json: bytes, structured_json: bytes) -> None:
        text, structured = lz4.block.compress(text_json), lz4.block.compress(structured_json)
        self._text_bytes = len(text)
        big = len(text) + len(structured) >= SPILL_MIN_BYTES
        self._file = nameless_files.filled(nameless_files.new_file("knowspec-answer-") if big else None,
                                           (text, structured))
        if self._file is not None:
            weakref.finalize(self, self._file.close)  # closed with the answer, not left to the collector
            self._pieces = len(text) + len(structured)
        else:
            self._pieces = (text, structured)

    @classmethod
    def of(cls, text: str, structured_json: bytes) -> KeptAnswer:
        """The answer of ``text`` and the structured content's JSON; ``UnicodeEncodeError`` for a
        text UTF-8 cannot carry (a lone surrogate). The text is encoded a slice at a time, never
        as one more ``str`` (four bytes a character as soon as one lies outside the BMP:
        databricks-okf's legacy graph text would take 25 MB, twice over, for 6 MB of UTF-8)."""
        return cls(b"".join(piece.encode("utf-8") for piece in json_pieces(text)), structured_json)

    @property
    def on_disk(self) -> bool:
        return self._file is not None

    def _piece(self, index: int) -> bytes:
        pieces = self._pieces
        if isinstance(pieces, tuple):
            return pieces[index]
        assert self._file is not None
        start, end = (0, self._text_bytes) if index == 0 else (self._text_bytes, pieces)
        return nameless_files.read_exactly(self._file.fileno(), start, end - start)

    def text_json(self) -> bytes:
        """The text as a JSON string literal (UTF-8)."""
        return lz4.block.decompress(self._piece(0))

    def structured_json(self) -> bytes:
        """The structured content as a JSON object (UTF-8)."""
        return lz4.block.decompress(self._piece(1))

    @property
    def text(self) -> str:
        return json.loads(self.text_json())

    @property
    def structured(self) -> dict[str, Any]:
        return json.loads(self.structured_json())

    def nbytes(self) -> int:
        """The compressed bytes this answer keeps, in memory or in its file: the caches' budget
        bounds both alike (on disk, a caller asking for many graph renders would otherwise fill
        the temporary folder instead of the memory the budget protects)."""
        pieces = self._pieces
        return sum(map(len, pieces)) if isinstance(pieces, tuple) else pieces


def _kept(runtime: process.Runtime) -> process.Cache:
    return runtime.cache("answers.kept", max_entries=MAX_KEPT_ANSWERS, sizeof=KeptAnswer.nbytes)


def kept_answer(runtime: process.Runtime, key: AnswerKey) -> KeptAnswer | None:
    """The answer kept under ``key`` (None: none, or one kept at another stamp)."""
    return _kept(runtime).peek(key.key, key.stamp)


def keep_answer(runtime: process.Runtime, key: AnswerKey, answer: KeptAnswer) -> None:
    """Keep ``answer`` under ``key`` (the pipeline, once the answer passed its schema)."""
    _kept(runtime).put(key.key, key.stamp, answer)


class KeptOutput(ToolOutput):
    """A kept answer given by its handler: the pipeline sends its JSON as it is, without
    validating or encoding it again; a direct reader of ``structured`` gets the values decoded.
    One the pipeline kept, or one its handler checked with the tool's output check as it made it
    (``CallContext.output_items_check``: get_semantic_graph, too big to hold as values)."""

    def __init__(self, answer: KeptAnswer) -> None:
        self.answer = answer  # ``keep`` reads its default: None

    @property
    def structured(self) -> dict[str, Any]:  # type: ignore[override]
        return self.answer.structured

    @property
    def text(self) -> str:  # type: ignore[override]
        return self.answer.text


def kept_output(runtime: process.Runtime, key: AnswerKey) -> KeptOutput | None:
    """The answer kept under ``key``, for its handler to return (None: answer as usual, with
    ``ToolOutput(..., keep=key)``); a refusal kept under it (:func:`keep_refusal`) is raised."""
    answer = kept_answer(runtime, key)
    if answer is not None:
        return KeptOutput(answer)
    refusal = _refusals(runtime).peek(key.key, key.stamp)
    if refusal is not None:
        raise refusal.detached()
    return None


def _refusals(runtime: process.Runtime) -> process.Cache:
    return runtime.cache("answers.refused", max_entries=MAX_KEPT_REFUSALS)


def keep_refusal(runtime: process.Runtime, key: AnswerKey, error: ToolError) -> None:
    """Keep ``error`` as the answer under ``key``: the handler refused after work that the same
    key and stamp would repeat to the same end (:func:`kept_output` raises it again)."""
    _refusals(runtime).put(key.key, key.stamp, error.detached())

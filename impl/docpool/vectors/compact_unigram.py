"""A pack's Unigram tokenizer in tens of MiB instead of ~280: the pieces in one dict, the rest
of the pipeline the ``tokenizers`` library's own.

``tokenizers`` keeps a Unigram vocabulary in a byte trie of hash maps: for e5's 250,002 pieces
(1.4M characters) that is ~250 MiB, a third of a vector server's memory
(``benchmarks/docpool_vector_memory.py``). Here the pieces live in one ``dict`` (piece -> id)
beside an array of scores, and the model step, the best segmentation of each pre-token
(:func:`unigram_ids`), runs here. Everything around it comes from the same ``tokenizer.json``
through the library: its normalizer and pre-tokenizer objects do their work; the special tokens
found in the raw text, the truncation and the single-sequence template are applied as the file
states them. The ids are the ones ``tokenizers`` gives (tests compare the two on generated and
real text). A file outside that shape (another model, added tokens matched after normalizing,
padding, left truncation) is loaded by ``tokenizers`` as it is (:func:`load_tokenizer`).
"""

from __future__ import annotations

import gc
import json
import math
import re
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UNK_PENALTY = 10.0  # an unknown character costs the lowest piece score minus this (as tokenizers)
WORD_CACHE = 10_000  # pre-tokens whose ids are kept (tokenizers' Unigram keeps as many)


@dataclass(frozen=True)
class Encoded:
    """What the embedder reads of an encoding: the token ids."""

    ids: list[int]


@dataclass(frozen=True, eq=False)
class UnigramPieces:
    """A Unigram vocabulary: piece -> id, each id's score, the unknown piece's id and cost."""

    ids: dict[str, int]
    scores: array          # float64 by id
    unk_id: int
    unk_score: float       # the lowest piece score minus UNK_PENALTY
    longest: int           # characters in the longest piece


def unigram_ids(word: str, pieces: UnigramPieces) -> list[int]:
    """The ids of ``word``'s best segmentation, as ``tokenizers``' Unigram model finds it.

    Viterbi from left to right: at each start, pieces in order of length, then the unknown
    piece for one character when no one-character piece starts there; an end keeps the first
    path that reaches it unless a later one scores strictly more. Runs of unknown characters
    are one token (the library's ``fuse_unk``), whose id is the unknown piece's.
    """
    n = len(word)
    if n == 0:
        return []
    get, scores, unk_id, unk_score = pieces.ids.get, pieces.scores, pieces.unk_id, pieces.unk_score
    best = [-math.inf] * (n + 1)  # scores are finite: the first path to reach an end always takes it
    best[0] = 0.0
    start = [-1] * (n + 1)
    chosen = [0] * (n + 1)
    for i in range(n):
        here = best[i]
        single = False
        for end in range(i + 1, min(n, i + pieces.longest) + 1):
            piece = get(word[i:end])
            if piece is not None:
                score = here + scores[piece]
                if score > best[end]:
                    best[end], start[end], chosen[end] = score, i, piece
                if end == i + 1:
                    single = True
        if not single:
            score = here + unk_score
            if score > best[i + 1]:
                best[i + 1], start[i + 1], chosen[i + 1] = score, i, unk_id
    out: list[int] = []
    end = n
    while end > 0:
        begin = start[end]
        # A run of unknown steps is one token: its text is never a piece (one would have
        # scored higher than unknown characters), so its id is the unknown piece's.
        if not (chosen[end] == unk_id and out and out[-1] == unk_id):
            out.append(chosen[end])
        end = begin
    out.reverse()
    return out


class CompactUnigramTokenizer:
    """``encode`` / ``encode_batch`` with the ids ``tokenizers`` gives for the same file."""

    def __init__(self, pieces: UnigramPieces, front: Any, specials: dict[str, int],
                 template: tuple[list[int], list[int]], max_length: int | None) -> None:
        self.pieces = pieces
        self._normalizer = front.normalizer
        self._pre_tokenizer = front.pre_tokenizer
        self._specials = specials
        self._special_split = (re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
                               if specials else None)
        self._head, self._tail = template
        self._words: dict[str, list[int]] = {}  # pre-token -> ids (read-only once stored)
        self._max_content = None if max_length is None else max(0, max_length - len(self._head) - len(self._tail))

    def no_padding(self) -> None:
        """Padding is never applied (the embedder pads its batches itself)."""

    def _segment_ids(self, text: str) -> list[int]:
        if self._normalizer is not None:
            text = self._normalizer.normalize_str(text)
        words = self._pre_tokenizer.pre_tokenize_str(text) if self._pre_tokenizer is not None else [(text, None)]
        out: list[int] = []
        cache = self._words
        for word, _ in words:
            ids = cache.get(word)
            if ids is None:
                if len(cache) >= WORD_CACHE:
                    cache.clear()
                ids = cache[word] = unigram_ids(word, self.pieces)
            out.extend(ids)
        return out

    def encode(self, text: str) -> Encoded:
        content: list[int] = []
        at = 0
        if self._special_split is not None:
            for match in self._special_split.finditer(text):
                content.extend(self._segment_ids(text[at:match.start()]))
                content.append(self._specials[match.group()])
                at = match.end()
        content.extend(self._segment_ids(text[at:]))
        if self._max_content is not None:
            content = content[:self._max_content]
        return Encoded(self._head + content + self._tail)

    def encode_batch(self, texts: list[str]) -> list[Encoded]:
        return [self.encode(text) for text in texts]


def _template(config: dict) -> tuple[list[int], list[int]] | None:
    """(ids before, ids after) the sequence of a single-sequence ``TemplateProcessing``."""
    processor = config.get("post_processor")
    if processor is None:
        return [], []
    if processor.get("type") != "TemplateProcessing":
        return None
    head: list[int] = []
    tail: list[int] = []
    seen_sequence = False
    for item in processor.get("single", []):
        if "Sequence" in item:
            if seen_sequence or item["Sequence"].get("id") != "A":
                return None
            seen_sequence = True
        elif "SpecialToken" in item:
            ids = processor["special_tokens"][item["SpecialToken"]["id"]]["ids"]
            (tail if seen_sequence else head).extend(int(i) for i in ids)
        else:
            return None
    return (head, tail) if seen_sequence else None


def _covered(config: dict) -> bool:
    model, truncation = config.get("model") or {}, config.get("truncation")
    added = config.get("added_tokens") or []
    return (model.get("type") == "Unigram" and not model.get("byte_fallback") and model.get("unk_id") is not None
            and config.get("padding") is None
            and all(not t.get("normalized") and not t.get("single_word") and not t.get("lstrip")
                    and not t.get("rstrip") for t in added)
            and (truncation is None or (truncation.get("direction") == "Right" and not truncation.get("stride"))))


def load_tokenizer(path: Path) -> Any:
    """The tokenizer of ``path`` (a ``tokenizer.json``): compact for a Unigram file of the
    covered shape, else ``tokenizers.Tokenizer.from_file``."""
    from tokenizers import Tokenizer

    config = json.loads(Path(path).read_text(encoding="utf-8"))
    template = _template(config) if _covered(config) else None
    vocab = config["model"]["vocab"] if template is not None else []
    pieces_text = "\x00".join(str(piece) for piece, _ in vocab)
    if template is None or pieces_text.count("\x00") != len(vocab) - 1:  # another shape, or a NUL in a piece
        return Tokenizer.from_file(str(path))
    scores = array("d", (float(score) for _, score in vocab))
    unk_id = int(config["model"]["unk_id"])
    specials = {t["content"]: int(t["id"]) for t in config.get("added_tokens") or []}
    truncation = config.get("truncation")
    max_length = None if truncation is None else int(truncation["max_length"])
    # The front: the same file with a one-piece model, for its normalizer and pre-tokenizer.
    config["model"] = {**config["model"], "vocab": [vocab[unk_id]], "unk_id": 0}
    config["added_tokens"], config["post_processor"] = [], None
    front = Tokenizer.from_str(json.dumps(config))
    del config, vocab
    gc.collect()
    # Split after the parsed file is gone: the kept strings are allocated together, not
    # scattered among the parse's freed lists and floats (which would pin their memory).
    names = pieces_text.split("\x00")
    del pieces_text
    pieces = UnigramPieces(ids={piece: i for i, piece in enumerate(names)}, scores=scores, unk_id=unk_id,
                           unk_score=min(scores, default=0.0) - UNK_PENALTY, longest=max(map(len, names), default=1))
    return CompactUnigramTokenizer(pieces, front, specials, template, max_length)

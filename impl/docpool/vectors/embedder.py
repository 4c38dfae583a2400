"""Run-time text embedding with a model pack (``model_int8.onnx`` + ``tokenizer.json`` [+ ``pack.json``]).

``onnxruntime`` is imported only when a vector query first needs a session, so importing the
server never loads it. Sessions are cached per model folder per process and reloaded when the
model file changes (a package update may replace it).

Typical call from the doc_search tool::

    q = query_vector(settings.model_dir, query, prefix=meta["vec_query_prefix"],
                     pool_model=meta.get("vec_model"), pool_dim=meta.get("vec_dim"))

Failures are ``ToolError("embedding_unavailable", ...)`` with the seed's messages
``embedding model not found`` / ``embedding runtime not found``; a pack whose model or
dimension differs from what the pool recorded is refused (``embedding model does not match
the pool``) instead of producing vectors in the wrong space.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.extras import missing_extra_message
from knowspec.impl.docpool.vectors.compact_unigram import load_tokenizer
from knowspec.impl.docpool.vectors.huge_pages import on_huge_pages
from knowspec.impl.docpool.vectors.parallelism import query_threads
from knowspec.impl.docpool.vectors.pooling import encode_batch, mean_pool_l2
from knowspec.impl.docpool.vectors.word_codes import WORD_CODES_FILE, WORD_CODES_INPUT, WordCodes

MODEL_FILE = "model_int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
PACK_FILE = "pack.json"
CODE = "embedding_unavailable"


@dataclass(frozen=True)
class PackInfo:
    """What a pack says about itself; ``model`` is ``None`` when the pack has no ``pack.json``."""

    model: str | None
    dim: int
    query_prefix: str = ""
    passage_prefix: str = ""


def _unavailable(message: str, detail: str) -> ToolError:
    return ToolError(CODE, message, diagnostics=[diagnostic(CODE, detail)])


def model_not_found(model_dir: Path, detail: str = "") -> ToolError:
    return _unavailable("embedding model not found", detail or f"no model pack in {model_dir}")


def runtime_not_found(detail: str) -> ToolError:
    return _unavailable("embedding runtime not found", detail)


def _import_runtime():
    try:
        import onnxruntime
    except ModuleNotFoundError as exc:
        raise runtime_not_found(missing_extra_message(exc) or f"onnxruntime could not be loaded: {exc}") from None
    except Exception as exc:  # a broken shared library
        raise runtime_not_found(f"onnxruntime could not be loaded: {exc}") from None
    return onnxruntime


class Embedder:
    """One loaded pack: a tokenizer and an ONNX Runtime session."""

    def __init__(self, model_dir: Path, session, tokenizer, info: PackInfo,
                 word_codes: WordCodes | None = None) -> None:
        self.model_dir = model_dir
        self.session = session
        self.tokenizer = tokenizer
        self.info = info
        self.word_codes = word_codes  # the word table, when the graph takes its rows as an input
        self.stamp: tuple[int, int] | None = None  # the model file's (mtime, size) when loaded
        self._input_names = {i.name for i in session.get_inputs()}
        try:  # about what the session holds, for the runtime's memory budget
            self.nbytes = (model_dir / MODEL_FILE).stat().st_size
        except OSError:
            self.nbytes = 0

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        if self.word_codes is not None:
            feeds[WORD_CODES_INPUT] = self.word_codes.gather(ids)
        return {k: v for k, v in feeds.items() if k in self._input_names}

    def embed(self, texts: list[str], prefix: str = "", batch_size: int = 1) -> np.ndarray:
        """Unit vectors ``[len(texts), dim]`` for ``prefix + text``.

        Dynamic int8 quantization scales activations over the whole batch, padding included, so
        a text's vector depends slightly on its batch mates (cosine ~0.999). One text per run
        (the default) keeps every vector reproducible; pass a larger ``batch_size`` only where
        throughput matters more than bit-identical vectors.
        """
        rows = []
        for start in range(0, len(texts), batch_size):
            batch = [prefix + t for t in texts[start:start + batch_size]]
            ids, mask = encode_batch(self.tokenizer, batch)
            hidden = self.session.run(["last_hidden_state"], self._feeds(ids, mask))[0]
            rows.append(mean_pool_l2(hidden, mask))
        if not rows:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        return np.concatenate(rows, axis=0)

    def embed_query(self, query: str, prefix: str) -> np.ndarray:
        """``embed([query], prefix)[0]`` without the batch machinery: one ``encode`` (no thread
        pool, no padding: the graph sees exactly the query's tokens) and one run."""
        ids = np.array([self.tokenizer.encode(prefix + query).ids], dtype=np.int64)
        mask = np.ones_like(ids)
        hidden = self.session.run(["last_hidden_state"], self._feeds(ids, mask))[0]
        return mean_pool_l2(hidden, mask)[0]

    def embed_passages(self, texts: list[str], prefix: str, batch_size: int = 1) -> np.ndarray:
        return self.embed(texts, prefix, batch_size)


def read_pack_info(model_dir: Path, session) -> PackInfo:
    """``pack.json`` if present; otherwise the dimension read from the graph's output."""
    dim = session.get_outputs()[0].shape[-1]
    if not isinstance(dim, int):  # a symbolic output width: ask the graph once
        names = {i.name for i in session.get_inputs()}
        probe = {n: np.ones((1, 2), dtype=np.int64) for n in ("input_ids", "attention_mask") if n in names}
        if "token_type_ids" in names:
            probe["token_type_ids"] = np.zeros((1, 2), dtype=np.int64)
        dim = int(session.run(["last_hidden_state"], probe)[0].shape[-1])
    path = model_dir / PACK_FILE
    if not path.exists():
        return PackInfo(model=None, dim=int(dim))
    meta = json.loads(path.read_text(encoding="utf-8"))
    if int(meta.get("dim", dim)) != dim:
        raise _unavailable("embedding model not found", f"{path}: dim {meta.get('dim')} but the graph gives {dim}")
    return PackInfo(
        model=meta.get("model"),
        dim=int(meta.get("dim", dim)),
        query_prefix=meta.get("query_prefix", ""),
        passage_prefix=meta.get("passage_prefix", ""),
    )


# ONNX Runtime fusions the session leaves out. Its fused SkipLayerNormalization kernel took 904 us a
# query (24 nodes) against 329 for the LayerNormalization and Add it replaces: a query embeds in
# 2.58 ms instead of 3.23, passages of 64 and 256 tokens 1.35x and 1.32x faster
# (`knowspec bench model-pack-ab --pack shipped=DIR --pack every-fusion=DIR --every-fusion
# every-fusion --op-profile`). The vectors stay as close to the source engine's (`knowspec model
# build`'s 12 check sentences: mean cosine 0.99704 either way) and within 0.9978 of the fused graph's.
UNFUSED = ("SkipLayerNormFusion",)


def session_options(ort, threads: int):
    """The ONNX Runtime options the pack's session runs with."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Fuses what ORT can (DynamicQuantizeMatMul, BiasGelu) but ``UNFUSED``; basic or extended
    # levels measured the same, so the default is only made explicit.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning worker threads burn a shared core while they wait: on the busy 2-core project host
    # two spinning threads doubled query latency (37 vs 17 ms p50), so idle threads sleep instead.
    # (Spinning only inside a run, with session.force_spinning_stop, took 0.9 ms off a vector call
    # but added 3 ms to hybrid ones, whose full-text half runs at the same time.)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def pack_session(ort, model_path: Path, threads: int, *, options=None, unfused: tuple[str, ...] = UNFUSED):
    """The pack's session as the embedder runs it: ``session_options`` (or ``options`` made from
    them, e.g. to profile or to keep the optimized graph), every fusion but the ``unfused`` ones."""
    return ort.InferenceSession(str(model_path), session_options(ort, threads) if options is None else options,
                                providers=["CPUExecutionProvider"], disabled_optimizers=list(unfused))


def open_pack(model_dir: Path, threads: int, *, unfused: tuple[str, ...] = UNFUSED) -> Embedder:
    """The pack in ``model_dir`` loaded afresh, outside the runtime's cache (the builder checks
    a pack this way before keeping it; the server goes through :func:`load_embedder`;
    ``unfused``: the fusions left out, for benchmarks/model_pack_ab.py)."""
    model_path, tok_path = model_dir / MODEL_FILE, model_dir / TOKENIZER_FILE
    missing = [p.name for p in (model_path, tok_path) if not p.is_file()]
    if missing:
        raise model_not_found(model_dir, f"{', '.join(missing)} missing in {model_dir}")
    ort = _import_runtime()
    try:
        import tokenizers  # noqa: F401  (compact_unigram loads with it)
    except ModuleNotFoundError as exc:
        raise runtime_not_found(missing_extra_message(exc) or str(exc)) from None

    try:
        with on_huge_pages():
            session = pack_session(ort, model_path, threads, unfused=unfused)
        tokenizer = load_tokenizer(tok_path)
    except Exception as exc:
        raise model_not_found(model_dir, f"model pack in {model_dir} is unreadable: {exc}") from None
    tokenizer.no_padding()
    word_codes = None
    if WORD_CODES_INPUT in {i.name for i in session.get_inputs()}:
        try:
            word_codes = WordCodes(model_dir / WORD_CODES_FILE)
        except (OSError, ValueError) as exc:
            raise model_not_found(model_dir, f"{WORD_CODES_FILE} in {model_dir} is missing or unreadable: {exc}") from None
    try:
        info = read_pack_info(model_dir, session)
    except (OSError, ValueError) as exc:  # pack.json unreadable or not JSON
        raise model_not_found(model_dir, f"{PACK_FILE} in {model_dir} is unreadable: {exc}") from None
    return Embedder(model_dir, session, tokenizer, info, word_codes)


MAX_CACHED_EMBEDDERS = 2


def _embedders(runtime: process.Runtime) -> process.Cache:
    """Loaded sessions per model folder (the runtime's ``docpool.embedders``), stamped with the
    model file's (mtime, size); the budget counts the model file's bytes."""
    return runtime.cache("docpool.embedders", max_entries=MAX_CACHED_EMBEDDERS, sizeof=lambda e: e.nbytes)


def load_embedder(model_dir: Path | str, *, threads: int | None = None) -> Embedder:
    """The cached embedder for ``model_dir``; reloaded when ``model_int8.onnx`` changes on disk.

    ``threads`` (intra-op threads) defaults to ``parallelism.query_threads()`` (one; why is
    there). With more, idle threads sleep rather than spin (see ``_load``), so a busy host loses
    little; every count gives bit-identical vectors.
    """
    model_dir = Path(model_dir).absolute()
    try:
        st = (model_dir / MODEL_FILE).stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        raise model_not_found(model_dir, f"{MODEL_FILE} missing in {model_dir}") from None

    def load() -> Embedder:
        embedder = open_pack(model_dir, threads or query_threads())
        embedder.stamp = stamp
        return embedder

    return _embedders(process.current()).get(model_dir, stamp, load)


def clear_cache() -> None:
    """Drop the loaded sessions and the query embeddings."""
    caches = process.current().caches
    for name in ("docpool.embedders", "docpool.query_vectors"):
        if name in caches:
            caches[name].clear()


def check_pack_matches(info: PackInfo, pool_model: str | None, pool_dim: int | None) -> None:
    """Refuse a pack whose identity or dimension differs from what the pool's meta recorded."""
    problems = []
    if pool_dim is not None and int(pool_dim) != info.dim:
        problems.append(f"pool vectors have dimension {int(pool_dim)}, the model gives {info.dim}")
    if pool_model and info.model and pool_model != info.model:
        problems.append(f"pool vectors were made with {pool_model}, the model pack is {info.model}")
    if problems:
        raise _unavailable("embedding model does not match the pool", "; ".join(problems))


def query_vector(
    model_dir: Path | str,
    query: str,
    *,
    prefix: str,
    pool_model: str | None = None,
    pool_dim: int | None = None,
) -> np.ndarray:
    """The unit query vector ``embed(prefix + query)`` after checking the pack against the pool.

    Kept in the runtime's ``docpool.query_vectors`` (``KNOWSPEC_QUERY_VECTORS`` entries, 0: off),
    keyed by the folder and the exact text embedded and stamped with the model file's (mtime,
    size) as loaded, so a replaced model never answers from an old entry; the vector is
    read-only (it is shared).
    """
    embedder = load_embedder(model_dir)
    check_pack_matches(embedder.info, pool_model, pool_dim)
    runtime = process.current()
    if runtime.settings.query_vectors <= 0:
        return _embedded(embedder, query, prefix)

    def embed() -> np.ndarray:
        vector = _embedded(embedder, query, prefix)
        vector.flags.writeable = False
        return vector

    return _query_vectors(runtime).get((embedder.model_dir, prefix + query), embedder.stamp, embed)


def _embedded(embedder: Embedder, query: str, prefix: str) -> np.ndarray:
    """``embed_query``, a pack file damaged since the pack loaded (its word table is read at
    every query) answering ``embedding_unavailable`` rather than an unexpected error."""
    try:
        return embedder.embed_query(query, prefix)
    except (OSError, ValueError) as exc:
        raise model_not_found(embedder.model_dir, f"model pack in {embedder.model_dir} is unreadable: {exc}") from None


def _query_vectors(runtime: process.Runtime) -> process.Cache:
    """Query embeddings by (model folder, embedded text); the budget counts their bytes."""
    return runtime.cache("docpool.query_vectors", max_entries=runtime.settings.query_vectors,
                         sizeof=lambda v: v.nbytes)

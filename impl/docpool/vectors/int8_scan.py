"""An exact shortcut to the top k of ``matrix @ q``: scan an int8 copy, then score few rows in float32.

A float32 scan of a 100k x 384 chunk matrix reads 150 MB per query and is bound by memory
bandwidth (~10 ms on one core). ONNX Runtime's ``MatMulInteger`` reads the int8 copy, a quarter
of the bytes, in ~1.5 ms a pass. Each row then gets an interval that surely holds its float32
score; every row whose interval reaches the k-th best lower end is scored exactly in float32
(about 500 of 100k for e5 vectors and k = 80), and the top k is taken from those. A row left out has an upper end below k
lower ends, so it scores strictly below k other rows: the result (rows, order, float32 scores)
is the one a full float32 scan gives.

The interval. A row ``v`` is stored as ``s_v*v8 + e_v`` (``v8`` in [-127, 127]); the query as
``s_q*q8 + s_r*r8 + e_r`` (``q8``, and ``r8`` for what ``q8`` misses, in [-63, 63]: two kernel
passes). Then ``q.v = s_v*(s_q*(q8.v8) + s_r*(r8.v8)) + q.e_v +
e_r.(s_v*v8)``, so the approximation is off by at most ``|q|*|e_v| + |e_r|*|s_v*v8|``, and the
float32 dot product differs from ``q.v`` by at most ``gamma_d*|q|*|v|`` (``gamma_d =
d*u/(1 - d*u)``, ``u = 2**-24``). The second pass makes the query's share of the error ~60x
smaller: ~500 rows left instead of ~6,000 (up to 35,000), so the tail stays short. One
pass with ``m = 2`` query rows would leave ORT's fast ``m = 1`` path (6.5 vs 2 x 1.4 ms).
A large sketch is cut into column shards, one per query thread (``parallelism``): both passes
over 100k rows took 1.4 ms on two cores instead of 2.7 ms on one.

Why the query gets only 7 bits per row: the kernel takes it as uint8 (shifted by +64 to
[1, 127]) and x86 AVX2 multiplies u8 x s8 pairs into a saturating int16 (``vpmaddubsw``); with
``2*127*127 < 2**15`` no pair saturates, so the integer dot products are exact on every CPU.
A probe with the extreme values checks that when the kernel loads; if it ever failed, or if
onnxruntime is missing, callers scan in float32 instead (:func:`int8_kernel` returns None).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from knowspec.impl.docpool.vectors.parallelism import run_split

ROW_LEVELS = 127        # row codes in [-127, 127] (int8)
QUERY_LEVELS = 63       # query codes in [-63, 63], fed shifted by QUERY_SHIFT as uint8 in [1, 127]
QUERY_SHIFT = 64
UNIT_ROUNDOFF = 2.0 ** -24
BLOCK_ROWS = 2048       # rows quantized at a time: ~20 MB of float64 temporaries while loading

Kernel = Callable[[np.ndarray, np.ndarray], "Sequence[np.ndarray]"]  # (m, dim) x (dim, n) -> m int32 rows


@dataclass(frozen=True, eq=False)
class Int8Sketch:
    """The int8 copy of a float32 matrix and the per-row terms of its score intervals.

    The codes are stored transposed, in column shards of consecutive rows (``starts[i]`` is the
    first row of ``shards[i]``), so each shard is one contiguous ``(1, dim) x (dim, n_i)`` kernel
    run and the shards of one query can be scanned on different cores.
    """

    shards: tuple[np.ndarray, ...]  # int8 [dim, n_i] each: row codes, transposed
    starts: tuple[int, ...]         # first row of each shard
    code_sums: np.ndarray   # int64 [n]: sum of each row's codes (undoes the query's shift)
    scale: np.ndarray       # float64 [n]: s_v
    err: np.ndarray         # float64 [n]: |e_v| + gamma_d*|v| (both multiply |q|)
    coded_norm: np.ndarray  # float64 [n]: |s_v*v8| (multiplies |e_r|)

    @property
    def rows(self) -> int:
        return len(self.scale)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.shards, self.code_sums, self.scale, self.err, self.coded_norm))


def gamma(dim: int) -> float:
    """Bound on the relative error of a float32 dot product of length ``dim``, with slack."""
    n = dim + 2
    return 1.01 * n * UNIT_ROUNDOFF / (1 - n * UNIT_ROUNDOFF)


def build_sketch(matrix: np.ndarray, block: int = BLOCK_ROWS, shards: int = 1) -> Int8Sketch:
    """Quantize ``matrix`` row by row (per-row scale ``max|v|/127``), ``block`` rows at a time,
    into ``shards`` column shards of near-equal size.

    A row that is zero gets scale 1; a row with a non-finite value gets an infinite error, so
    it is always scored exactly.
    """
    n, dim = matrix.shape
    starts = tuple(sorted({n * i // max(1, shards) for i in range(max(1, shards))}))
    ends = starts[1:] + (n,)
    parts = tuple(np.empty((dim, b - a), dtype=np.int8) for a, b in zip(starts, ends))
    code_sums = np.empty(n, dtype=np.int64)
    scale = np.empty(n, dtype=np.float64)
    err = np.empty(n, dtype=np.float64)
    coded_norm = np.empty(n, dtype=np.float64)
    g = gamma(dim)
    for a in range(0, n, block):
        rows = matrix[a:a + block].astype(np.float64)
        finite = np.isfinite(rows).all(axis=1)
        rows[~finite] = 0.0
        s = np.abs(rows).max(axis=1) / ROW_LEVELS
        s[s == 0] = 1.0
        codes = np.clip(np.rint(rows / s[:, None]), -ROW_LEVELS, ROW_LEVELS)
        coded = codes * s[:, None]
        codes_t = codes.T.astype(np.int8)
        for part, start, end in zip(parts, starts, ends):  # the block's rows that fall in each shard
            lo, hi = max(a, start), min(a + len(rows), end)
            if lo < hi:
                part[:, lo - start:hi - start] = codes_t[:, lo - a:hi - a]
        code_sums[a:a + block] = codes.sum(axis=1).astype(np.int64)
        scale[a:a + block] = s
        err[a:a + block] = np.where(finite, np.linalg.norm(rows - coded, axis=1) + g * np.linalg.norm(rows, axis=1),
                                    np.inf)
        coded_norm[a:a + block] = np.linalg.norm(coded, axis=1)
    return Int8Sketch(parts, starts, code_sums, scale, err, coded_norm)


def quantize_query(q: np.ndarray) -> tuple[np.ndarray, float, float, float, float] | None:
    """``(shifted uint8 codes [2, dim], s_q, s_r, |e_r|, |q|)``: the query's codes (row 0) and
    the codes of what they miss (row 1); None for a zero or non-finite query."""
    q64 = np.asarray(q, dtype=np.float64)
    top = float(np.abs(q64).max()) if q64.size else 0.0
    if not np.isfinite(top) or top == 0.0:
        return None
    s_q = top / QUERY_LEVELS
    codes = np.clip(np.rint(q64 / s_q), -QUERY_LEVELS, QUERY_LEVELS)
    rest = q64 - codes * s_q
    s_r = float(np.abs(rest).max()) / QUERY_LEVELS or 1.0
    rest_codes = np.clip(np.rint(rest / s_r), -QUERY_LEVELS, QUERY_LEVELS)
    shifted = (np.stack([codes, rest_codes]) + QUERY_SHIFT).astype(np.uint8)
    return shifted, s_q, s_r, float(np.linalg.norm(rest - rest_codes * s_r)), float(np.linalg.norm(q64))


def candidate_rows(sketch: Int8Sketch, kernel: Kernel, q: np.ndarray, mask: np.ndarray | None,
                   k: int) -> np.ndarray | None:
    """Ascending rows that may hold the ``k`` best float32 scores among ``mask`` (a superset of
    them), or None when the query cannot be quantized (the caller scans in float32)."""
    return candidate_rows_many([(sketch, mask)], kernel, q, k)[0]


def candidate_rows_many(sketches: Sequence[tuple[Int8Sketch, np.ndarray | None]], kernel: Kernel,
                        q: np.ndarray, k: int) -> list[np.ndarray | None]:
    """``candidate_rows`` for several ``(sketch, mask)`` pairs and one query, in one parallel step.

    Thread ``j`` (``parallelism.run_split``) computes the intervals of shard ``j`` of every
    sketch, so a vector query's chunk and topic sketches share the threads evenly. A sketch's
    k-th best lower end over all its rows is the k-th best of its shards' own k best.
    """
    quantized = quantize_query(q)
    out: list[np.ndarray | None] = [np.zeros(0, dtype=np.intp) if k <= 0 or sketch.rows == 0 else None
                                    for sketch, _ in sketches]
    if quantized is None:
        return out  # the undecided ones: None, scan in float32
    shifted, s_q, s_r, e_r, q_norm = quantized
    offset = QUERY_SHIFT * (s_q + s_r)
    todo = [i for i, rows in enumerate(out) if rows is None]

    def intervals(sketch: Int8Sketch, mask: np.ndarray | None, shard: int) -> tuple[np.ndarray, np.ndarray]:
        """(the shard's k best lower ends, every row's upper end)"""
        a = sketch.starts[shard]
        b = a + sketch.shards[shard].shape[1]
        dots = kernel(shifted, sketch.shards[shard])  # exact int32 dot products, then float64:
        approx = dots[0] * s_q                         # its rounding is far below gamma's slack
        approx += dots[1] * s_r
        approx -= offset * sketch.code_sums[a:b]
        approx *= sketch.scale[a:b]
        radius = sketch.err[a:b] * q_norm
        radius += sketch.coded_norm[a:b] * e_r
        low = approx - radius
        if mask is not None:
            low[~mask[a:b]] = -np.inf
        best_low = np.partition(low, len(low) - k)[len(low) - k:] if k < len(low) else low
        approx += radius  # now the upper ends
        return best_low, approx

    def thread_share(shard: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return {i: intervals(*sketches[i], shard) for i in todo if shard < len(sketches[i][0].shards)}

    shares = run_split(thread_share, range(max((len(sketches[i][0].shards) for i in todo), default=0)))
    for i in todo:
        sketch, mask = sketches[i]
        parts = [share[i] for share in shares if i in share]
        lows = np.concatenate([low for low, _ in parts])
        kth_low = np.partition(lows, len(lows) - k)[len(lows) - k] if k < sketch.rows else -np.inf
        keep = np.concatenate([upper for _, upper in parts]) >= kth_low
        if mask is not None:
            keep &= mask
        out[i] = np.flatnonzero(keep)
    return out


# -- the kernel: ONNX Runtime's MatMulInteger, (1, dim) uint8 x (dim, n) int8 -> int32 (1, n) a run --

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    """One protobuf field: an int as a varint, text or a message as length-delimited bytes."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    payload = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _tensor(name: str, elem_type: int, dims: tuple[str, str]) -> bytes:
    shape = b"".join(_field(1, _field(2, d)) for d in dims)  # symbolic dims (dim_param)
    return _field(1, name) + _field(2, _field(1, _field(1, elem_type) + _field(2, shape)))


UINT8, INT8, INT32 = 2, 3, 6  # onnx TensorProto.DataType


def matmul_integer_model() -> bytes:
    """A one-node ONNX model ``s = MatMulInteger(q, codes)`` (ir 8, opset 17), written directly as
    protobuf so the server needs no ``onnx`` package (``tests/docpool/test_vector_speed_paths``
    compares it with ``onnx.helper``'s)."""
    node = _field(1, "q") + _field(1, "codes") + _field(2, "s") + _field(4, "MatMulInteger")
    graph = (_field(1, node) + _field(2, "int8_scan")
             + _field(11, _tensor("q", UINT8, ("m", "dim"))) + _field(11, _tensor("codes", INT8, ("dim", "n")))
             + _field(12, _tensor("s", INT32, ("m", "n"))))
    return _field(1, 8) + _field(7, graph) + _field(8, _field(1, "") + _field(2, 17))


def _probe(kernel: Kernel) -> bool:
    """The kernel's integer dot products equal numpy's at the extreme codes (no saturation)."""
    dim, n = 64, 8
    rng = np.random.default_rng(0)
    codes = rng.choice(np.array([-ROW_LEVELS, ROW_LEVELS, -1, 0, 1]), size=(dim, n)).astype(np.int8)
    codes[:, 0], codes[:, 1] = ROW_LEVELS, -ROW_LEVELS
    q = rng.choice(np.array([-QUERY_LEVELS, QUERY_LEVELS]), size=dim)
    q[: dim // 2] = QUERY_LEVELS
    q = np.stack([q, -q])
    shifted = (q + QUERY_SHIFT).astype(np.uint8)
    want = q.astype(np.int64) @ codes.astype(np.int64)
    got = np.asarray(kernel(shifted, codes)).astype(np.int64) - QUERY_SHIFT * codes.astype(np.int64).sum(axis=0)
    return bool(np.array_equal(got, want))


_kernel: list[Kernel | None] = []
_kernel_lock = threading.Lock()


def _load_kernel() -> Kernel | None:
    try:
        import onnxruntime as ort
    except Exception:  # ImportError, or a broken shared library: float32 scan instead
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1   # the m = 1 path ran no faster with two (1.44 vs 1.53 ms)
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(matmul_integer_model(), options, providers=["CPUExecutionProvider"])
    except Exception:
        return None

    def run(row: np.ndarray, codes_t: np.ndarray) -> np.ndarray:
        return session.run(None, {"q": row, "codes": codes_t})[0][0]

    def kernel(shifted: np.ndarray, codes_t: np.ndarray) -> list[np.ndarray]:
        """One run per query row: ORT's fast m = 1 path (threads split the rows into shards,
        not the two query rows: each thread then reads only its own part of the codes)."""
        return [run(shifted[i:i + 1], codes_t) for i in range(len(shifted))]

    try:
        return kernel if _probe(kernel) else None
    except Exception:
        return None


def int8_kernel() -> Kernel | None:
    """The process's int8 dot-product kernel, loaded once; None without a usable onnxruntime."""
    with _kernel_lock:
        if not _kernel:
            _kernel.append(_load_kernel())
        return _kernel[0]

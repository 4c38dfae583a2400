"""An exact shortcut to the top k of ``matrix @ q``: scan an int8 copy, then score few rows in float32.

A float32 scan of a 100k x 384 chunk matrix reads 150 MB per query and is bound by memory
bandwidth. The int8 copy is a quarter of the bytes, and it is handed to ONNX Runtime once, as
the constant weight of a one-node ``MatMulInteger`` model: the session packs it for its integer
kernels when it is made, so a query's two passes are one run over the packed codes (a weight fed
as an input is packed again on every run, which cost more than the float32 scan it replaced). The
packed codes are then moved onto huge pages (``huge_pages``): a TLB entry per 2 MiB they read.
Each row then gets an interval that surely holds its float32 score; every row whose interval
reaches the k-th best lower end is scored exactly in float32 (about 500 of 100k for e5 vectors
and k = 80), and the top k is taken from those. A row left out has an upper end below k lower
ends, so it scores strictly below k other rows: the result (rows, order, float32 scores) is the
one a full float32 scan gives. Everything runs on the calling thread: no fan-out that loses
when the cores are busy.

The interval. A row ``v`` is stored as ``s_v*v8 + e_v`` (``v8`` in [-127, 127], ``s_v`` a
float32 number); the query as ``u*(2**j*q8 + r8) + e_r`` (``q8``, and ``r8`` for what ``q8``
misses, in [-63, 63]: two query rows of one run; ``u = s_q*2**-j`` so the two rows' integer dot
products combine into one exact int32, ``E = 2**j*(q8.v8) + r8.v8``). Then ``q.v = u*s_v*E +
q.e_v + e_r.(s_v*v8)``: the centre ``u*s_v*E`` is off by at most ``|q|*|e_v| + |e_r|*|s_v*v8|``,
and the float32 dot product differs from ``q.v`` by at most ``gamma_d*|q|*|v|`` (``gamma_d =
d*u32/(1 - d*u32)``, ``u32 = 2**-24``). The second query row makes the query's share of the
error ~60x smaller: ~500 rows left instead of ~6,000 (up to 35,000), so the tail stays short.

The pass over every row is float32 (``s_v*E``, two roundings, off by at most ``2.01*u32*|s_v*v8|
*|2**j*q8 + r8|``): it only narrows the rows whose exact float64 interval is looked at, its
thresholds widened by that bound, so the rows chosen are those of the float64 rule over every
row (``interval_rows``).

Why the query gets only 7 bits per row: the kernel takes it as uint8 (shifted by +64 to
[1, 127], the shift undone by the kernel's zero point) and x86 AVX2 multiplies u8 x s8 pairs
into a saturating int16 (``vpmaddubsw``); with ``2*127*127 < 2**15`` no pair saturates, so the
integer dot products are exact on every CPU. A probe with the extreme values checks that,
through the same packed-weight path, when the kernel loads; if it ever failed, or if onnxruntime
is missing, callers scan in float32 instead (:func:`int8_kernel` returns None).
"""

from __future__ import annotations

import math
import os
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from knowspec.impl.docpool.vectors.huge_pages import on_huge_pages

ROW_LEVELS = 127        # row codes in [-127, 127] (int8)
QUERY_LEVELS = 63       # query codes in [-63, 63], fed shifted by QUERY_SHIFT as uint8 in [1, 127]
QUERY_SHIFT = 64        # also the kernel's zero point for the query, so its dots are of the codes
UNIT_ROUNDOFF = 2.0 ** -24
INT32_MAX = 2 ** 31 - 1
BLOCK_ROWS = 2048       # rows quantized at a time: ~20 MB of float64 temporaries while loading
SUBSAMPLE = 8           # the first pass's k-th centre is looked for among every 8th row

Scan = Callable[[np.ndarray], np.ndarray]  # shifted query rows uint8 (m, dim) -> int32 (m, n): exact code dots
Kernel = Callable[[np.ndarray], Scan]      # row codes, transposed, int8 (dim, n) -> their Scan


@dataclass(frozen=True, eq=False)
class Int8Sketch:
    """The int8 copy of a float32 matrix (inside its ``scan``) and the per-row terms of its
    score intervals."""

    scan: Scan              # the codes' exact integer dot products with (unshifted) query codes
    code_bytes: int         # bytes the scan holds for the codes
    scale: np.ndarray       # float32 [n]: s_v
    err: np.ndarray         # float64 [n]: |e_v| + gamma_d*|v| (both multiply |q|)
    coded_norm: np.ndarray  # float64 [n]: |s_v*v8| (multiplies |e_r|)
    unbounded: np.ndarray = field(init=False)  # rows with a non-finite value (infinite err): always scored
    widest_err: float = field(init=False)      # the largest finite err
    widest_coded_norm: float = field(init=False)

    def __post_init__(self) -> None:
        finite = np.isfinite(self.err)
        object.__setattr__(self, "unbounded", np.flatnonzero(~finite))
        object.__setattr__(self, "widest_err", float(self.err[finite].max()) if finite.any() else 0.0)
        object.__setattr__(self, "widest_coded_norm", float(self.coded_norm.max()) if len(self.coded_norm) else 0.0)

    @property
    def rows(self) -> int:
        return len(self.scale)

    @property
    def nbytes(self) -> int:
        arrays = (self.scale, self.err, self.coded_norm, self.unbounded)
        return self.code_bytes + sum(a.nbytes for a in arrays)


def gamma(dim: int) -> float:
    """Bound on the relative error of a float32 dot product of length ``dim``, with slack."""
    n = dim + 2
    return 1.01 * n * UNIT_ROUNDOFF / (1 - n * UNIT_ROUNDOFF)


def max_shift_bits(dim: int) -> int:
    """The largest ``j`` for which ``2**j*(q8.v8) + r8.v8`` cannot overflow an int32 (-1: none)."""
    most = QUERY_LEVELS * ROW_LEVELS * dim
    return int(math.floor(math.log2(INT32_MAX / most - 1))) if INT32_MAX > 2 * most else -1


def quantize_rows(matrix: np.ndarray, block: int = BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                          np.ndarray]:
    """``(codes_t int8 [dim, n], scale float32, err, coded_norm)``: each row quantized with scale
    ``max|v|/127`` (rounded to a float32 number), ``block`` rows at a time.

    A row that is zero gets scale 1; a row with a non-finite value gets an infinite error, so
    it is always scored exactly.
    """
    n, dim = matrix.shape
    codes_t = np.empty((dim, n), dtype=np.int8)
    scale = np.empty(n, dtype=np.float32)
    err = np.empty(n, dtype=np.float64)
    coded_norm = np.empty(n, dtype=np.float64)
    g = gamma(dim)
    for a in range(0, n, block):
        rows = matrix[a:a + block].astype(np.float64)
        finite = np.isfinite(rows).all(axis=1)
        rows[~finite] = 0.0
        s = (np.abs(rows).max(axis=1) / ROW_LEVELS).astype(np.float32).astype(np.float64)
        s[s == 0] = 1.0
        codes = np.clip(np.rint(rows / s[:, None]), -ROW_LEVELS, ROW_LEVELS)
        coded = codes * s[:, None]
        codes_t[:, a:a + len(rows)] = codes.T
        scale[a:a + block] = s
        err[a:a + block] = np.where(finite, np.linalg.norm(rows - coded, axis=1) + g * np.linalg.norm(rows, axis=1),
                                    np.inf)
        coded_norm[a:a + block] = np.linalg.norm(coded, axis=1)
    return codes_t, scale, err, coded_norm


def build_sketch(matrix: np.ndarray, kernel: Kernel, block: int = BLOCK_ROWS) -> Int8Sketch | None:
    """The sketch of ``matrix``: its codes go to ``kernel``, which keeps its own copy (an ONNX
    Runtime session keeps the weight packed for its integer kernels: about the codes' bytes,
    :func:`scan_session`). None when the combined dot products could overflow an int32 (a
    dimension past ~130,000)."""
    if max_shift_bits(matrix.shape[1]) < 0:
        return None
    codes_t, scale, err, coded_norm = quantize_rows(matrix, block)
    return Int8Sketch(kernel(codes_t), codes_t.nbytes, scale, err, coded_norm)


@dataclass(frozen=True)
class QueryCodes:
    """A query as the sketches take it: ``u*(2**shift*q8 + r8) + e_r``."""

    shifted: np.ndarray   # uint8 [2, dim]: q8 and r8, each + QUERY_SHIFT
    shift: int            # j
    unit: float           # u = s_q*2**-j: the value of one step of the combined code
    e_r: float            # |e_r|
    q_norm: float         # |q|
    combined_norm: float  # |2**j*q8 + r8|


def quantize_query(q: np.ndarray) -> QueryCodes | None:
    """The query's codes (row 0) and the codes of what they miss (row 1), at a step ``2**-j``
    of the first's (the largest that keeps every residual code within 63, at most what an int32
    holds); None for a zero or non-finite query."""
    q64 = np.asarray(q, dtype=np.float64).reshape(-1)
    top = float(np.abs(q64).max()) if q64.size else 0.0
    if not np.isfinite(top) or top == 0.0:
        return None
    most = max_shift_bits(len(q64))
    if most < 0:
        return None
    s_q = top / QUERY_LEVELS
    codes = np.clip(np.rint(q64 / s_q), -QUERY_LEVELS, QUERY_LEVELS)
    rest = q64 - codes * s_q
    rest_top = float(np.abs(rest).max())
    # the largest j with s_q*2**-j >= rest_top/63 (so r8 = rint(rest/u) stays within 63)
    j = most if rest_top == 0.0 else min(most, max(0, math.floor(math.log2(s_q * QUERY_LEVELS / rest_top))))
    unit = math.ldexp(s_q, -j)
    rest_codes = np.clip(np.rint(rest / unit), -QUERY_LEVELS, QUERY_LEVELS)
    shifted = np.empty((2, len(q64)), dtype=np.uint8)
    shifted[0] = codes + QUERY_SHIFT
    shifted[1] = rest_codes + QUERY_SHIFT
    combined = codes * float(2 ** j) + rest_codes
    return QueryCodes(shifted, j, unit, float(np.linalg.norm(rest - rest_codes * unit)), float(np.linalg.norm(q64)),
                      float(np.linalg.norm(combined)))


def combined_dots(sketch: Int8Sketch, codes: QueryCodes) -> np.ndarray:
    """``E = 2**j*(q8.v8) + r8.v8`` for every row: exact int32 (``max_shift_bits``)."""
    dots = np.asarray(sketch.scan(codes.shifted))
    combined = np.left_shift(dots[0], codes.shift, out=dots[0] if dots.flags.writeable else None)
    combined += dots[1]
    return combined


def interval(sketch: Int8Sketch, codes: QueryCodes, combined: np.ndarray,
             rows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
    """``(centre, radius)`` of the rows' intervals in float64: ``u*s_v*E`` and
    ``|e_v|*|q| + |s_v*v8|*|e_r|`` (the rule ``candidate_rows`` applies)."""
    centre = combined[rows].astype(np.float64)
    centre *= sketch.scale[rows]
    centre *= codes.unit
    radius = np.multiply(sketch.err[rows], codes.q_norm)
    radius += np.multiply(sketch.coded_norm[rows], codes.e_r)
    return centre, radius


def interval_rows(sketch: Int8Sketch, codes: QueryCodes, combined: np.ndarray, mask: np.ndarray | None,
                  k: int) -> np.ndarray:
    """The rule itself over every row's interval: ascending rows whose upper end reaches the
    ``k``-th best lower end among the allowed rows (a row with a non-finite value: always)."""
    centre, radius = interval(sketch, codes, combined, slice(None))
    low = centre - radius
    low[sketch.unbounded] = -np.inf
    if mask is not None:
        low[~mask] = -np.inf
    kth_low = np.sort(low)[::-1][k - 1] if k <= len(low) else -np.inf
    keep = centre + radius >= kth_low
    keep[sketch.unbounded] = True
    return np.flatnonzero(keep if mask is None else keep & mask)


def _at_most(x: float) -> np.float32:
    """The largest float32 <= ``x`` (a float32 array compared with it keeps every row >= ``x``)."""
    top = float(np.finfo(np.float32).max)
    if x >= top:
        return np.float32(top)
    if x < -top:
        return np.float32(-np.inf)
    y = np.float32(x)
    return y if float(y) <= x else np.nextafter(y, np.float32(-np.inf))


@dataclass(frozen=True)
class Candidates:
    """The rows ``candidate_rows`` keeps, ascending, with their intervals' centres and upper
    ends (a row with a non-finite value: centre -inf, upper end +inf)."""

    rows: np.ndarray
    centre: np.ndarray
    upper: np.ndarray


def candidate_rows(sketch: Int8Sketch, q: np.ndarray, mask: np.ndarray | None, k: int,
                   codes: QueryCodes | None = None) -> np.ndarray | None:
    """``candidates(...).rows``: ascending rows that may hold the ``k`` best float32 scores
    among ``mask`` (a superset of them), exactly ``interval_rows``; None when the query cannot
    be quantized (the caller scans in float32)."""
    found = candidates(sketch, q, mask, k, codes)
    return None if found is None else found.rows


def candidates(sketch: Int8Sketch, q: np.ndarray, mask: np.ndarray | None, k: int,
               codes: QueryCodes | None = None) -> Candidates | None:
    """The rows that may hold the ``k`` best float32 scores among ``mask`` (``candidate_rows``)
    with their intervals. ``codes``: the query's ``quantize_query``, when the caller already has it.

    Only a float32 approximation of the centres (``s_v*E``, in steps ``u``) is computed for
    every row, off by at most ``slack``; no radius exceeds ``widest`` (the largest finite err and
    coded norm: rounding is monotone). ``c``, a lower bound of the k-th best centre (the k-th of
    every ``SUBSAMPLE``-th row: a subset's k-th best is never above the whole's), puts the k-th
    best lower end at ``c - widest`` or above; so every row whose lower end may count, and every
    row whose upper end may reach it, has its centre at ``c - 2*widest`` or above. Only those
    rows (the cut widened by ``slack`` and a rounding margin; once they are known, the cut moves
    up to their own k-th best centre, which is the whole's) get the float64 values of
    ``interval``, and the rule runs on them: the same rows as ``interval_rows``.
    """
    if k <= 0 or sketch.rows == 0:
        return _every(np.zeros(0, dtype=np.intp))
    codes = codes or quantize_query(q)
    if codes is None:
        return None
    combined = combined_dots(sketch, codes)
    approx = np.multiply(combined, sketch.scale, dtype=np.float32)   # s_v*E, in steps u
    n = len(approx)
    allowed_unbounded = sketch.unbounded if mask is None else sketch.unbounded[mask[sketch.unbounded]]
    if mask is not None:
        approx[~mask] = -np.inf
    if len(sketch.unbounded):          # a lower end of -inf never counts towards the k-th
        approx[sketch.unbounded] = -np.inf
    kth_centre = -np.inf
    if k * SUBSAMPLE <= n:
        sample = approx[::SUBSAMPLE]
        kth_centre = float(np.partition(sample, len(sample) - k)[len(sample) - k])
    if kth_centre == -np.inf and k < n:
        kth_centre = float(np.partition(approx, n - k)[n - k])
    if kth_centre == -np.inf:          # fewer than k bounded rows allowed: every allowed row
        return _every(np.arange(n) if mask is None else np.flatnonzero(mask))
    unit = codes.unit
    slack = 2.01 * UNIT_ROUNDOFF * (sketch.widest_coded_norm * codes.combined_norm) * 1.0001
    widest = (sketch.widest_err * codes.q_norm + sketch.widest_coded_norm * codes.e_r) / unit

    def reaching(kth: float) -> np.float32:  # the cut below a k-th best centre, widened
        return _at_most(kth - 2 * (widest + slack) - 1e-9 * (1.0 + abs(kth) + widest + slack))

    band = np.flatnonzero(approx >= reaching(kth_centre))
    if len(band) > k:  # the band holds the k best centres: their k-th is the whole's, a narrower cut
        near = approx[band]
        band = band[near >= reaching(float(np.partition(near, len(near) - k)[len(near) - k]))]
    centre, radius = interval(sketch, codes, combined, band)
    low = centre - radius
    kth_low = low[np.argpartition(low, len(low) - k)[len(low) - k]]
    upper = centre + radius
    kept = upper >= kth_low
    found = Candidates(band[kept], centre[kept], upper[kept])
    if not len(allowed_unbounded):
        return found
    rows = np.union1d(found.rows, allowed_unbounded)
    at = np.searchsorted(found.rows, rows)
    known = np.isin(rows, found.rows)
    centre_all, upper_all = np.full(len(rows), -np.inf), np.full(len(rows), np.inf)
    centre_all[known], upper_all[known] = found.centre[at[known]], found.upper[at[known]]
    return Candidates(rows, centre_all, upper_all)


def _every(rows: np.ndarray) -> Candidates:
    """Rows kept without intervals (every allowed row): no bound tells them apart."""
    return Candidates(rows, np.full(len(rows), -np.inf), np.full(len(rows), np.inf))


# -- the kernel: ONNX Runtime's MatMulInteger with the codes as its constant weight --------------

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


def _tensor_type(name: str, elem_type: int, dims: tuple[str | int, ...]) -> bytes:
    """A graph input or output: symbolic dims (dim_param) by name, fixed ones (dim_value) by size."""
    shape = b"".join(_field(1, _field(1, d) if isinstance(d, int) else _field(2, d)) for d in dims)
    return _field(1, name) + _field(2, _field(1, _field(1, elem_type) + _field(2, shape)))


UINT8, INT8, INT32 = 2, 3, 6  # onnx TensorProto.DataType


def _head(number: int, size: int) -> bytes:
    """The tag and length of a length-delimited field of ``size`` bytes."""
    return _varint(number << 3 | 2) + _varint(size)


def matmul_integer_model(codes_t: np.ndarray) -> bytes:
    """A one-node ONNX model ``s = MatMulInteger(q, codes, QUERY_SHIFT)`` (ir 8, opset 17) whose
    ``codes`` is the constant int8 ``codes_t`` [dim, n] and whose query zero point undoes the
    query's shift, written directly as protobuf so the server needs no ``onnx`` package
    (``tests/docpool/test_vector_speed_paths`` compares it with ``onnx.helper``'s)."""
    return b"".join(matmul_integer_model_parts(codes_t))


def matmul_integer_model_parts(codes_t: np.ndarray) -> list[bytes | memoryview]:
    """:func:`matmul_integer_model` in pieces, the codes a view of ``codes_t``'s own bytes (when
    contiguous int8): written one after another to a file, the model is never one more copy."""
    codes = np.ascontiguousarray(codes_t, dtype=np.int8)
    dim, n = codes.shape
    raw = codes.data.cast("B")
    weight_head = b"".join(_field(1, d) for d in (dim, n)) + _field(2, INT8) + _field(8, "codes") + _head(9, raw.nbytes)
    weight_size = len(weight_head) + raw.nbytes
    zero_point = _field(5, _field(2, UINT8) + _field(8, "q_zero_point") + _field(9, bytes([QUERY_SHIFT])))
    node = (_field(1, "q") + _field(1, "codes") + _field(1, "q_zero_point") + _field(2, "s")
            + _field(4, "MatMulInteger"))
    before = _field(1, node) + _field(2, "int8_scan") + _head(5, weight_size)
    after = (zero_point + _field(11, _tensor_type("q", UINT8, ("m", dim)))
             + _field(12, _tensor_type("s", INT32, ("m", n))))
    graph_size = len(before) + weight_size + len(after)
    opset = _field(8, _field(1, "") + _field(2, 17))
    return [_field(1, 8) + _head(7, graph_size) + before + weight_head, raw, after + opset]


def scan_session(ort, codes_t: np.ndarray, options):
    """ONNX Runtime's session of :func:`matmul_integer_model`, opened from a private temporary file.

    A session made from bytes keeps them for its life (onnxruntime's Python ``InferenceSession``
    holds ``path_or_bytes`` to be able to remake itself), beside the packed weight it made from
    them: twice the codes (100k x 384: 74 MiB instead of 37; benchmarks/docpool_vector_memory.py).
    Opened from a path, it holds only the packed weight, and the file is removed at once. Where
    no temporary file can be written, the session is made from bytes (the same scan)."""
    try:
        with tempfile.TemporaryDirectory(prefix="knowspec-int8-") as folder:
            path = os.path.join(folder, "int8_scan.onnx")
            with open(path, "wb") as out:
                for part in matmul_integer_model_parts(codes_t):
                    out.write(part)
            return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except OSError:
        return ort.InferenceSession(matmul_integer_model(codes_t), options, providers=["CPUExecutionProvider"])


def _probe(kernel: Kernel) -> bool:
    """The kernel's integer dot products of the (unshifted) query codes equal numpy's at the
    extreme codes (no saturation)."""
    dim, n = 64, 8
    rng = np.random.default_rng(0)
    codes = rng.choice(np.array([-ROW_LEVELS, ROW_LEVELS, -1, 0, 1]), size=(dim, n)).astype(np.int8)
    codes[:, 0], codes[:, 1] = ROW_LEVELS, -ROW_LEVELS
    q = rng.choice(np.array([-QUERY_LEVELS, QUERY_LEVELS]), size=dim)
    q[: dim // 2] = QUERY_LEVELS
    q = np.stack([q, -q])
    shifted = (q + QUERY_SHIFT).astype(np.uint8)
    want = q.astype(np.int64) @ codes.astype(np.int64)
    got = np.asarray(kernel(codes)(shifted)).astype(np.int64)
    return bool(np.array_equal(got, want))


_kernel: list[Kernel | None] = []
_kernel_lock = threading.Lock()


def _load_kernel() -> Kernel | None:
    try:
        import onnxruntime as ort
    except Exception:  # ImportError, or a broken shared library: float32 scan instead
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1   # one query, one core: a split lost when the cores were busy
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")

    def kernel(codes_t: np.ndarray) -> Scan:
        with on_huge_pages():
            session = scan_session(ort, codes_t, options)

        def scan(shifted: np.ndarray) -> np.ndarray:
            return session.run(None, {"q": shifted})[0]

        return scan

    try:
        return kernel if _probe(kernel) else None
    except Exception:
        return None


def int8_kernel() -> Kernel | None:
    """The process's int8 kernel (codes in, their scan out), loaded and probed once; None without
    a usable onnxruntime."""
    with _kernel_lock:
        if not _kernel:
            _kernel.append(_load_kernel())
        return _kernel[0]

"""The word-embedding table outside the ONNX graph: a query reads the rows of its own tokens.

e5's table is 250,002 rows of 384 8-bit codes (96 MB), and ONNX Runtime holds an initializer in
memory whole (mapping it from an external file does not help: each row read faults in its
neighbours too, ~50 MiB after 70 queries). A query needs ~15 rows. So the builder moves the
quantized table out of ``model_int8.onnx`` into ``word_codes.npy`` and the graph takes the rows
as an input, ``word_codes`` (int8 ``[batch, seq, hidden]``), into the same ``DequantizeLinear``
the table fed: the vectors are bit for bit those of the graph with the table inside. At run
time :class:`WordCodes` reads each distinct token's row with ``pread``: nothing of the table is
resident but the page cache the kernel may reclaim.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

WORD_CODES_FILE = "word_codes.npy"
WORD_CODES_INPUT = "word_codes"


def split_word_table(model_path: Path, table_path: Path) -> bool:
    """Move the quantized table that ``Gather``s by ``input_ids`` out of the graph in
    ``model_path`` (rewritten in place) into ``table_path``; False, and nothing written, when
    the graph has no such table (e.g. a float32 one)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_path))
    graph = model.graph
    gathers = [n for n in graph.node if n.op_type == "Gather" and n.input[1] == "input_ids"]
    initializers = {t.name: t for t in graph.initializer}
    if len(gathers) != 1 or gathers[0].input[0] not in initializers:
        return False
    gather = gathers[0]
    consumers = [n for n in graph.node if gather.output[0] in n.input]
    table = initializers[gather.input[0]]
    code_types = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
    if table.data_type not in code_types or [c.op_type for c in consumers] != ["DequantizeLinear"]:
        return False
    codes = numpy_helper.to_array(table)
    np.save(table_path, np.ascontiguousarray(codes), allow_pickle=False)
    consumers[0].input[0] = WORD_CODES_INPUT
    graph.node.remove(gather)
    graph.initializer.remove(table)
    graph.input.append(onnx.helper.make_tensor_value_info(
        WORD_CODES_INPUT, table.data_type, ["batch", "seq", int(codes.shape[1])]))
    onnx.save(model, str(model_path))
    return True


class WordCodes:
    """Rows of a ``word_codes.npy`` table, read on demand; safe to share between threads
    (``pread`` moves no file position)."""

    def __init__(self, path: Path) -> None:
        from numpy.lib import format as npy

        with open(path, "rb") as fh:
            version = npy.read_magic(fh)
            read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, fortran, dtype = read_header(fh)
            self._offset = fh.tell()
        self.dtype = np.dtype(dtype)
        if fortran or self.dtype not in (np.dtype(np.int8), np.dtype(np.uint8)) or len(shape) != 2:
            raise ValueError(f"{path.name}: not a C-ordered 8-bit [rows, hidden] table")
        self.rows, self.hidden = int(shape[0]), int(shape[1])
        self._fd = os.open(path, os.O_RDONLY)

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """``table[ids]`` (``ids.shape + (hidden,)``), each distinct row read once."""
        distinct = np.array(sorted(set(ids.ravel().tolist())), dtype=np.int64)
        if len(distinct) and (distinct[0] < 0 or distinct[-1] >= self.rows):
            raise ValueError(f"token id outside the table's {self.rows} rows")
        hidden, offset = self.hidden, self._offset
        data = b"".join(os.pread(self._fd, hidden, offset + int(i) * hidden) for i in distinct.tolist())
        if len(data) != len(distinct) * hidden:
            raise ValueError("word codes table is shorter than its header says")
        rows = np.frombuffer(data, dtype=self.dtype).reshape(len(distinct), hidden)
        return rows[np.searchsorted(distinct, ids)]

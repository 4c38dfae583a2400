"""Firebird statement messages packed and unpacked here, over ``firebird-driver``'s interfaces.

The driver's own ``Cursor.execute`` rebuilds the input metadata of every ``str`` parameter on
every call (a metadata builder per execute: ~160 us of a ~200 us one-parameter SELECT on the
embedded engine), unpacks rows through generic per-column dispatch, and reads each BLOB after
two info calls. A doc_get runs two such statements, an import one per row. Here a prepared
statement's parameter and column layout is read once (``Layout``); values are packed straight
into its input message, rows unpacked from its output message, BLOBs read segment by segment.

Only the types the pool schema uses are handled (VARCHAR/CHAR, integers without scale, DOUBLE,
BLOB); ``Unpackable`` tells the caller to use the driver's own path: at preparation for a
statement with another type, at execution for a value that does not fit its parameter (a
string too long for its VARCHAR, a value of another Python type), so errors stay the driver's.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any, Sequence

from knowspec.impl.extras import require

SEGMENT = 65535  # the largest BLOB segment
_NATIVE = sys.byteorder  # messages are in the client machine's byte order
_NULL = (1).to_bytes(2, _NATIVE)  # a parameter's 2-byte NULL flag
_NOT_NULL = bytes(2)


class Unpackable(Exception):
    """A type or value this module does not pack: the driver's own path is used."""


# What making or using a ``Layout`` raises when the driver's own path must be taken instead: a
# type or value not handled here, or a driver without the internals it reads.
USE_THE_DRIVER = (Unpackable, AttributeError, TypeError)


def _types():
    return require("firebird.driver.types")


class Layout:
    """A prepared statement's input message (packing) and output columns (unpacking)."""

    def __init__(self, statement, encoding: str) -> None:
        t = _types().SQLDataType
        self._t = t
        self.statement = statement
        self.encoding = encoding
        kinds = {t.VARYING: "varying", t.TEXT: "text", t.SHORT: "int", t.LONG: "int", t.INT64: "int",
                 t.DOUBLE: "double", t.BLOB: "blob"}
        meta = statement._in_meta
        self.params: list[tuple[str, int, int, int]] = []
        self.in_buffer = None
        self._view = memoryview(b"")
        if meta is not None:
            self.in_buffer = ctypes.create_string_buffer(meta.get_message_length())
            self._view = memoryview(self.in_buffer).cast("B")
            for i in range(meta.get_count()):
                kind = kinds.get(meta.get_type(i))
                if kind in (None, "text") or (kind == "int" and (meta.get_scale(i) or meta.get_subtype(i))):
                    raise Unpackable(meta.get_type(i))
                self.params.append((kind, meta.get_offset(i), meta.get_length(i), meta.get_null_offset(i)))
        self.columns: list[tuple[str, int, int, int, int, int]] = []
        for d in statement._out_desc or ():
            kind = kinds.get(d.datatype)
            if kind is None or (kind == "int" and (d.scale or d.subtype)):
                raise Unpackable(d.datatype)
            self.columns.append((kind, d.offset, d.length, d.null_offset, d.subtype, d.charset))

    # -- input ---------------------------------------------------------------------------------
    def pack(self, row: Sequence[Any], blob=None) -> Any:
        """``row`` into the input message (``blob(value) -> 8-byte id`` stores BLOB values).

        Every parameter's NULL flag and value are written (no clearing of the whole message
        first: bytes past a VARCHAR's length, and a NULL's value, are never read)."""
        buf = self.in_buffer
        if buf is None:
            if row:
                raise Unpackable("parameters given to a statement without any")
            return None
        if len(row) != len(self.params):
            raise Unpackable("parameter count")
        view = self._view
        for value, (kind, offset, length, null_at) in zip(row, self.params):
            if value is None:
                view[null_at:null_at + 2] = _NULL
                continue
            view[null_at:null_at + 2] = _NOT_NULL
            if kind == "varying":
                if isinstance(value, str):
                    data = value.encode(self.encoding)
                elif isinstance(value, (bytes, bytearray)):
                    data = bytes(value)
                else:
                    raise Unpackable(type(value))
                size = len(data)
                if size > length:
                    raise Unpackable("value longer than its parameter")
                view[offset:offset + 2] = size.to_bytes(2, _NATIVE)
                view[offset + 2:offset + 2 + size] = data
            elif kind == "int":
                if not isinstance(value, int) or isinstance(value, bool):
                    raise Unpackable(type(value))
                try:
                    view[offset:offset + length] = value.to_bytes(length, _NATIVE, signed=True)
                except OverflowError:
                    raise Unpackable("integer out of range") from None
            elif kind == "double":
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise Unpackable(type(value))
                view[offset:offset + 8] = struct.pack("=d", float(value))
            else:
                if blob is None:
                    raise Unpackable("BLOB parameter")
                view[offset:offset + 8] = blob(value)
        return buf

    # -- output --------------------------------------------------------------------------------
    def rows(self, attachment, transaction, params: Sequence[Any]) -> list[tuple]:
        """Every row of the SELECT with ``params``, in ``transaction`` (the iTransaction)."""
        buf = self.pack(params)
        stmt = self.statement
        result = stmt._istmt.open_cursor(transaction, stmt._in_meta, buf, stmt._out_meta, 0)
        out = []
        try:
            ok = _types().StateResult.OK
            message = stmt._out_buffer
            while result.fetch_next(message) == ok:
                out.append(self._unpack(message, attachment, transaction))
        finally:
            result.close()
        return out

    def _unpack(self, message, attachment, transaction) -> tuple:
        at = ctypes.addressof(message)
        row: list[Any] = []
        for kind, offset, length, null_at, subtype, charset in self.columns:
            if message[null_at] != b"\x00":
                row.append(None)
            elif kind == "varying":
                size = int.from_bytes(ctypes.string_at(at + offset, 2), _NATIVE)
                raw = ctypes.string_at(at + offset + 2, size)
                row.append(raw if charset == 1 else raw.decode(self.encoding))  # 1: OCTETS
            elif kind == "text":  # CHAR(n): as the driver returns it (n characters, padded)
                raw = ctypes.string_at(at + offset, length)
                if charset == 1:
                    row.append(raw)
                else:
                    width = {4: length // 4, 69: length // 4, 3: length // 3}.get(charset, length)
                    row.append(raw.decode(self.encoding)[:width])
            elif kind == "int":
                row.append(int.from_bytes(ctypes.string_at(at + offset, length), _NATIVE, signed=True))
            elif kind == "double":
                row.append(struct.unpack("=d", ctypes.string_at(at + offset, 8))[0])
            else:
                data = read_blob(attachment, transaction, ctypes.string_at(at + offset, 8))
                row.append(data.decode(self.encoding) if subtype == 1 else data)
        return tuple(row)


def read_blob(attachment, transaction, blob_id: bytes) -> bytes:
    """The whole BLOB ``blob_id`` (8 bytes of a message), its segments read until none is left."""
    a = require("firebird.driver.fbapi")
    state = _types().StateResult
    quad = a.ISC_QUAD(int.from_bytes(blob_id[:4], _NATIVE), int.from_bytes(blob_id[4:], _NATIVE))
    blob = attachment.open_blob(transaction, quad)
    parts = []
    got = a.Cardinal(0)
    segment = ctypes.create_string_buffer(SEGMENT)
    try:
        while blob.get_segment(SEGMENT, segment, got) in (state.OK, state.SEGMENT):
            parts.append(ctypes.string_at(segment, got.value))
    finally:
        blob.close()
    return b"".join(parts)


def write_blob(attachment, transaction, value: Any, encoding: str) -> bytes:
    """A new BLOB holding ``value`` (``str`` encoded): its 8-byte id for an input message."""
    a = require("firebird.driver.fbapi")
    data = value.encode(encoding) if isinstance(value, str) else bytes(value)
    blob_id = a.ISC_QUAD(0, 0)
    blob = attachment.create_blob(transaction, blob_id)
    try:
        if data:
            chunk = ctypes.create_string_buffer(data, len(data))
            for at in range(0, len(data), SEGMENT):
                blob.put_segment(min(SEGMENT, len(data) - at), ctypes.addressof(chunk) + at)
    finally:
        blob.close()
    return ctypes.string_at(ctypes.addressof(blob_id), ctypes.sizeof(blob_id))

"""Length-prefixed binary encoding shared by every digest recipe of the write contract.

Every recipe hashes a sequence of primitives: ``u64`` is 8-byte big-endian, ``str``/``bytes``
are a u64 byte length followed by the bytes, ``bool`` is u64 1/0 and ``opt`` is a bool
presence flag followed by the value only when present. Keeping these in one place means
two recipes can never disagree about framing.
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
ZERO_REVISION = "sha256:" + "0" * 64


def u64(value: int) -> bytes:
    if value < 0 or value >= 1 << 64:
        raise ValueError("u64 out of range")
    return value.to_bytes(8, "big")


def enc_bytes(data: bytes) -> bytes:
    return u64(len(data)) + data


def enc_str(text: str) -> bytes:
    return enc_bytes(text.encode("utf-8"))


def enc_bool(flag: bool) -> bytes:
    return u64(1 if flag else 0)


def enc_strs(label: str, items: Iterable[str]) -> bytes:
    """A labelled block: str(label) ‖ u64(n) ‖ str(item)…"""
    items = list(items)
    return enc_str(label) + u64(len(items)) + b"".join(enc_str(i) for i in items)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_string(data: bytes) -> str:
    """``sha256:`` + lowercase hex of SHA-256(data)."""
    return "sha256:" + sha256_hex(data)


def is_digest(value: object) -> bool:
    return isinstance(value, str) and DIGEST_RE.match(value) is not None

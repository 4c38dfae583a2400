"""The bundle revision: one digest over every revision-visible file (spec/okf/contract/write.md §2.1)."""

from __future__ import annotations

import hashlib
from typing import Mapping

from knowspec.impl.okf.write.encoding import enc_bytes, enc_str


def file_digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def revision_of(files: Mapping[str, bytes]) -> str:
    """``sha256:`` over str(path) ‖ str(sha256(file)) for paths in ascending byte order."""
    h = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.encode("utf-8")):
        h.update(enc_str(path))
        h.update(enc_bytes(file_digest(files[path])))
    return "sha256:" + h.hexdigest()

"""Commit receipts: the durable proof that a change set was published (spec/okf/contract/write.md §7.3).

A receipt is canonical JSON with a fixed key set, stored under ``.okf/receipts`` and named
by a hash of its idempotency key, so a replay finds it without scanning. Anything that does
not re-encode to the same bytes is treated as storage corruption.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass

from knowspec.impl import runtime as process
from knowspec.impl.okf.write import atomic
from knowspec.impl.okf.write.encoding import is_digest

RECEIPTS_DIR = "receipts"
RETENTION_SECONDS = 24 * 3600
KEEP_NEWEST = 1000
PRUNE_INTERVAL_SECONDS = 60.0  # a process scans one receipts folder at most this often
_KEYS = (
    "FormatVersion", "ChangeSetID", "IdempotencyKey", "RequestDigest", "BaseRevision",
    "ResultRevision", "CommitTime", "ChangedRefs", "ChangedFiles",
)


class StorageCorrupt(Exception):
    """Private store metadata does not have its canonical form."""


@dataclass(frozen=True)
class Receipt:
    ChangeSetID: str
    IdempotencyKey: str
    RequestDigest: str
    BaseRevision: str
    ResultRevision: str
    CommitTime: str
    ChangedRefs: tuple[str, ...]
    ChangedFiles: tuple[dict, ...]
    FormatVersion: int = 1

    def changed_paths(self) -> list[str]:
        paths = {f["Path"] for f in self.ChangedFiles} | {f["From"] for f in self.ChangedFiles if f.get("From")}
        return sorted(paths, key=lambda p: p.encode("utf-8"))

    def to_bytes(self) -> bytes:
        data = asdict(self)
        data["ChangedRefs"] = list(self.ChangedRefs)
        data["ChangedFiles"] = [dict(f) for f in self.ChangedFiles]
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Receipt":
        try:
            data = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
        except (UnicodeDecodeError, ValueError) as exc:
            raise StorageCorrupt("receipt is not canonical JSON") from exc
        if not isinstance(data, dict) or set(data) != set(_KEYS) or data["FormatVersion"] != 1:
            raise StorageCorrupt("receipt has the wrong keys or format version")
        receipt = cls(
            **{**data, "ChangedRefs": tuple(data["ChangedRefs"]),
               "ChangedFiles": tuple(data["ChangedFiles"])}
        )
        if receipt.to_bytes() != raw or not (is_digest(receipt.BaseRevision) and is_digest(receipt.ResultRevision)):
            raise StorageCorrupt("receipt bytes are not canonical")
        return receipt


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def receipt_name(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode("utf-8")).hexdigest() + ".json"


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def load(receipts_fd: int, idempotency_key: str) -> Receipt | None:
    from knowspec.impl.okf.write.rootfs import CaptureError, read_regular

    try:
        raw = read_regular(receipts_fd, receipt_name(idempotency_key))
    except CaptureError as exc:
        raise StorageCorrupt(str(exc)) from exc
    if raw is None:
        return None
    receipt = Receipt.from_bytes(raw)
    if receipt.IdempotencyKey != idempotency_key:
        raise StorageCorrupt("receipt is filed under another idempotency key")
    return receipt


def store(receipts_fd: int, receipt: Receipt) -> None:
    name = receipt_name(receipt.IdempotencyKey)
    atomic.replace_file(receipts_fd, name, receipt.to_bytes(), name + ".tmp")


_clock = time.monotonic


def prune_due(receipts_fd: int) -> bool:
    """Whether this process should prune the folder now: at most once a minute each, since a
    prune stats every receipt and the newest 1000 always stay (2-3 ms a commit once a bundle
    has had that many). Retention is a least, so a receipt past it may stay a minute longer."""
    st = os.fstat(receipts_fd)
    last_prunes = process.current().cache("okf.write.receipt_prunes", max_entries=64)
    key, now = (st.st_dev, st.st_ino), _clock()
    last = last_prunes.peek(key)
    if last is not None and now - last < PRUNE_INTERVAL_SECONDS:
        return False
    last_prunes.put(key, None, now)
    return True


def prune(receipts_fd: int, now: float | None = None) -> None:
    """Drop receipts older than the retention window, always keeping the newest ones."""
    now = time.time() if now is None else now
    with os.scandir(receipts_fd) as it:
        entries = [(e.stat(follow_symlinks=False).st_mtime, e.name) for e in it if e.name.endswith(".json")]
    entries.sort(reverse=True)
    for mtime, name in entries[KEEP_NEWEST:]:
        if now - mtime > RETENTION_SECONDS:
            atomic.unlink_if_exists(receipts_fd, name)

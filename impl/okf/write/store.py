"""The transactional bundle store: snapshot, compare-and-swap commit, replay, recovery.

One ``Store`` wraps one pinned root fd. ``commit`` follows spec/okf/contract/write.md §7.2: under the
exclusive lock it recovers any interrupted commit, answers a replay from the receipt of the
same idempotency key, re-snapshots and refuses when the bundle moved since the plan's base
(the sole authorization to publish), then stages, crosses the durable journal boundary and
publishes. Cancellation is honoured only before that boundary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from knowspec.impl import runtime as process
from knowspec.impl.okf.bundle.captured_files import size_of, size_tally_of, sizes_or_none
from knowspec.impl.okf.bundle.snapshot import read_limits
from knowspec.impl.okf.write import journal, lock, receipts, volume_probe
from knowspec.impl.okf.write.path_aliases import Aliasing, first_alias
from knowspec.impl.okf.write.paths import is_writable_path
from knowspec.impl.okf.write.plan import Plan
from knowspec.impl.okf.write.receipts import Receipt, StorageCorrupt
from knowspec.impl.okf.write.revision import revision_of, revision_with
from knowspec.impl.okf.write.rootfs import ResultOverLimits, capture_files

MAX_STAGED_PAYLOAD = 16 << 20
MAX_STAGED_TOTAL = 64 << 20
MAX_STAGED_FILES = 10_000


def _result_sizes(files: Mapping[str, bytes], writes: Mapping[str, int], deletes: Iterable[str]) -> dict[str, int]:
    """Path -> bytes of a commit's result, in the order the limits name its first bad file."""
    sizes = {path: size_of(files, path) for path in files if path not in deletes}
    sizes.update(writes)
    return sizes


class Conflict(Exception):
    def __init__(self, expected: str, actual: str, retryable: bool = True) -> None:
        super().__init__(f"bundle revision moved from {expected} to {actual}")
        self.expected, self.actual, self.retryable = expected, actual, retryable


class IdempotencyConflict(Exception):
    """The idempotency key was already used for a different request."""


class Committed(Exception):
    """Publication failed after the durable boundary: the commit stands (recovery finishes
    it), so callers treat the carried receipt as success."""

    def __init__(self, receipt: Receipt, cause: BaseException) -> None:
        super().__init__(f"commit is durable but publication did not finish: {cause}")
        self.receipt, self.cause = receipt, cause


class InvalidCommit(Exception):
    """The plan cannot be published (bad path, over the staging limits)."""


@dataclass(frozen=True)
class CommitRequest:
    change_set_id: str
    idempotency_key: str
    request_digest: str
    plan: Plan | None  # None: replay an earlier identical commit or report the conflict
    changed_refs: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommitResult:
    receipt: Receipt
    replayed: bool


def _in_place(files: Mapping[str, bytes], plan: Plan) -> bool:
    """Whether the bundle holds what ``plan`` writes and lacks what it deletes."""
    return (all(files.get(path) == data for path, data in plan.writes.items())
            and not any(path in files for path in plan.deletes))


def _never_cancelled() -> None:
    return None


class Store:
    def __init__(
        self,
        root_fd: int,
        *,
        lease_timeout: float = lock.DEFAULT_LEASE_TIMEOUT,
        step_hook: Callable[[str], None] | None = None,
        capture: Callable[[], tuple[Mapping[str, bytes], str]] | None = None,
        aliasing: Aliasing | None = None,
    ) -> None:
        """``capture``: the strict capture to use under the lock (files, revision); the walk by
        default, a cached one when the caller has it (``bundle_io.locked_capture``).
        ``aliasing``: how the volume compares names; probed on each commit when not given."""
        self.root_fd = root_fd
        self.lease_timeout = lease_timeout
        self._step = step_hook or (lambda _name: None)
        self._capture = capture or self._walk
        self._aliasing = aliasing

    def snapshot(self) -> tuple[Mapping[str, bytes], str]:
        """Strict snapshot (links are corruption) after finishing any interrupted commit."""
        self.recover()
        return self._walk()

    def _walk(self) -> tuple[Mapping[str, bytes], str]:
        files = capture_files(self.root_fd, strict=True)
        return files, revision_of(files)

    def recover(self) -> Receipt | None:
        if not journal.pending(self.root_fd):
            return None
        with lock.exclusive(self.root_fd, self.lease_timeout):
            return journal.recover(self.root_fd, self._step, self.lease_timeout)

    def lookup(self, idempotency_key: str) -> Receipt | None:
        okf_fd = journal.open_private(self.root_fd, create=False)
        if okf_fd is None:
            return None
        try:
            try:
                receipts_fd = os.open(receipts.RECEIPTS_DIR, journal.DIR_FLAGS, dir_fd=okf_fd)
            except FileNotFoundError:
                return None
            try:
                return receipts.load(receipts_fd, idempotency_key)
            finally:
                os.close(receipts_fd)
        finally:
            os.close(okf_fd)

    def commit(self, req: CommitRequest, check_cancelled: Callable[[], None] = _never_cancelled) -> CommitResult:
        check_cancelled()
        self._validate(req)
        with lock.exclusive(self.root_fd, self.lease_timeout):
            journal.recover(self.root_fd, timeout=self.lease_timeout)
            prior = self.lookup(req.idempotency_key)
            if prior is not None:
                if prior.RequestDigest != req.request_digest:
                    raise IdempotencyConflict("idempotency key reused for a different request")
                if req.plan is None:
                    return CommitResult(prior, replayed=True)
            files, actual = self._capture()
            if prior is not None and req.plan is not None and _in_place(files, req.plan):
                return CommitResult(prior, replayed=True)
            # (a prior whose change is gone, undone or written over, is not replayed: its receipt
            # would confirm a write the bundle does not hold; the request is committed again)
            if req.plan is None or actual != req.plan.base_revision:
                raise Conflict(req.plan.base_revision if req.plan else "", actual)
            if revision_with(files, actual, req.plan.writes, req.plan.deletes) != req.plan.result_revision:
                raise InvalidCommit("plan result revision does not match its writes")
            # the capture's kept tally, moved by the change: no pass over the bundle's files
            plan = req.plan
            writes = {path: len(data) for path, data in plan.writes.items()}
            result = size_tally_of(files).after(sizes_or_none(files), writes, plan.deletes)
            problem = result.unreadable_because(read_limits(process.current()),
                                                lambda: _result_sizes(files, writes, plan.deletes))
            if problem is not None:
                raise ResultOverLimits(problem)
            # the store's folder first: two nested writers starting at once see each other's
            okf_fd = journal.open_private(self.root_fd, create=True)
            assert okf_fd is not None
            try:
                try:
                    journal.check_not_nested(self.root_fd)
                    journal.check_publishable(self.root_fd, [*req.plan.writes, *req.plan.deletes])
                except journal.Unpublishable as exc:
                    raise InvalidCommit(str(exc)) from None
                self._check_no_aliases(files, plan, okf_fd)
                check_cancelled()
                return CommitResult(self._publish(req, okf_fd, check_cancelled), replayed=False)
            finally:
                os.close(okf_fd)

    def _validate(self, req: CommitRequest) -> None:
        plan = req.plan
        if plan is None:
            return
        paths = list(plan.writes) + list(plan.deletes)
        if not all(is_writable_path(p) for p in paths):
            raise InvalidCommit("plan names a path outside the revision-visible set")
        # a size the schema admits (a 16 MiB body) past what one commit stages: a limit, not bad input
        if len(paths) > MAX_STAGED_FILES:
            raise ResultOverLimits("the plan stages too many files")
        sizes = [len(b) for b in plan.writes.values()]
        if any(s > MAX_STAGED_PAYLOAD for s in sizes) or sum(sizes) > MAX_STAGED_TOTAL:
            raise ResultOverLimits("the plan exceeds the staging limits")

    def _check_no_aliases(self, files: Mapping[str, bytes], plan: Plan, okf_fd: int) -> None:
        """Refuse a write or delete whose name the volume takes for another name of the bundle
        (or of the same commit): publishing it would replace or delete the other file."""
        aliasing = self._aliasing if self._aliasing is not None else volume_probe.probe_aliasing(okf_fd)
        if not aliasing.any:
            return
        pair = first_alias(files, [*plan.writes, *plan.deletes], aliasing)
        if pair is not None:
            raise InvalidCommit(f"this file system takes {pair[0]!r} and {pair[1]!r} for one file; "
                                "a change that writes or deletes one of them would change the other")

    def _publish(self, req: CommitRequest, okf_fd: int, check_cancelled: Callable[[], None]) -> Receipt:
        plan = req.plan
        assert plan is not None
        changed = [{"Kind": "write", "Path": p} for p in plan.writes]
        changed += [{"Kind": "delete", "Path": p} for p in plan.deletes]
        changed.sort(key=lambda f: (f["Path"].encode("utf-8"), f["Kind"]))
        receipt = Receipt(
            ChangeSetID=req.change_set_id,
            IdempotencyKey=req.idempotency_key,
            RequestDigest=req.request_digest,
            BaseRevision=plan.base_revision,
            ResultRevision=plan.result_revision,
            CommitTime=receipts.now_utc(),
            ChangedRefs=tuple(sorted(set(req.changed_refs))),
            ChangedFiles=tuple(changed),
        )
        try:
            manifest = journal.write_journal(okf_fd, plan.writes, lambda entries: {
                "format": journal.FORMAT, "writes": entries,
                "deletes": sorted(plan.deletes), "receipt": receipt.to_bytes().decode("utf-8"),
            }, self._step_and_check(check_cancelled))
        except BaseException:
            journal.clean_staging(okf_fd)
            raise
        self._step("boundary")
        try:
            return journal.publish(self.root_fd, okf_fd, manifest, self._step, self.lease_timeout)
        except Exception as exc:  # the journal stays; the next call rolls it forward
            raise Committed(receipt, exc) from exc

    def _step_and_check(self, check_cancelled: Callable[[], None]) -> Callable[[str], None]:
        def step(name: str) -> None:
            self._step(name)
            check_cancelled()

        return step


__all__ = [
    "CommitRequest", "CommitResult", "Committed", "Conflict", "IdempotencyConflict", "InvalidCommit",
    "Store", "StorageCorrupt",
]

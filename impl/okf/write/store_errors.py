"""One place that runs a store commit for a tool and maps store failures to envelope codes.

Mapping (spec/okf/contract/write.md §4.5 step 6): conflict -> ``revision_conflict`` (retryable), idempotency
or receipt mismatch -> ``plan_mismatch``, corruption -> ``operation_rejected``, cancellation
before the durable boundary -> ``operation_cancelled``; a receipt carried by a post-boundary
failure is success.
"""

from __future__ import annotations

from typing import Callable, Mapping

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write import lock
from knowspec.impl.okf.write.changeset import ChangeSet
from knowspec.impl.okf.write.plan import Plan
from knowspec.impl.okf.write.receipts import Receipt, StorageCorrupt
from knowspec.impl.okf.write.rootfs import CaptureError, CaptureLimit, ResultOverLimits
from knowspec.impl.okf.write.store import (
    CommitRequest, Committed, Conflict, IdempotencyConflict, InvalidCommit, Store,
)


def receipt_matches(receipt: Receipt, cs: ChangeSet, key: str, digest: str, check_base: bool = True) -> bool:
    return (receipt.ChangeSetID == cs.id and receipt.IdempotencyKey == key
            and receipt.RequestDigest == digest and (not check_base or receipt.BaseRevision == cs.base_revision))


def commit_or_raise(
    root_fd: int,
    cs: ChangeSet,
    key: str,
    digest: str,
    plan: Plan | None,
    check: Callable[[], None],
    *,
    conflict: Callable[[], Exception],
    mismatch: Callable[[], Exception],
    step_hook: Callable[[str], None] | None = None,
    check_base: bool = True,
    capture: Callable[[], tuple[Mapping[str, bytes], str]] | None = None,
) -> Receipt:
    """Commit ``plan`` (None: replay-or-conflict only) and return the verified receipt."""
    store = Store(root_fd, step_hook=step_hook, capture=capture)
    try:
        result = store.commit(CommitRequest(cs.id, key, digest, plan, tuple(plan.affected_refs) if plan else ()), check)
        receipt = result.receipt
    except Committed as exc:
        receipt = exc.receipt
    except Conflict:
        raise conflict() from None
    except IdempotencyConflict:
        raise mismatch() from None
    except (StorageCorrupt, CaptureError) as exc:
        raise ToolError("operation_rejected", f"bundle store refused the commit: {exc}") from None
    except ResultOverLimits as exc:
        raise ToolError("resource_limit",
                        f"the write would make the bundle exceed MCP resource limits: {exc}") from None
    except CaptureLimit:
        raise ToolError("resource_limit", "bundle exceeds MCP resource limits") from None
    except lock.LockTimeout:
        raise ToolError("operation_rejected", "bundle is locked by another writer", retryable=True) from None
    except InvalidCommit as exc:
        raise ToolError("invalid_request", f"apply concept patch: {exc}") from None
    except OSError:
        raise ToolError("invalid_request", "operation failed; sensitive path redacted") from None
    if not receipt_matches(receipt, cs, key, digest, check_base):
        raise mismatch()
    return receipt

"""Who may see which topic of a document pool (seed 001, "Authorization").

A topic is allowed when its collection has ``erisim = 'herkes'`` or one of its ``doc$acl``
principals is in the caller's set ``{user, roles..., *}``, compared ASCII case-insensitively.
A stdio caller is unrestricted. The storages apply the resulting ``Access`` inside their
queries (before ranking and limits); the help pool is read without authorization.
"""

from __future__ import annotations

from knowspec.impl.context import Caller, CallContext
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access
from knowspec.impl.rules.fold import ascii_lower


def principal_set(caller: Caller) -> frozenset[str]:
    """``{user, roles..., *}`` lowered ASCII-only (``İ`` stays ``İ``, as the seed says)."""
    return frozenset(ascii_lower(n) for n in (caller.user, *caller.roles, "*") if n)


def access_for(ctx: CallContext) -> Access:
    """The document-pool access of the caller of ``ctx``."""
    caller = ctx.caller
    if caller.unrestricted:
        return UNRESTRICTED
    return Access(principal_set(caller))

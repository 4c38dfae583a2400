"""What a tool handler receives besides its arguments, and what it returns.

Handlers are plain synchronous functions ``handler(args, ctx) -> ToolOutput`` run in a worker
thread. ``args`` is the generated pydantic input model (defaults applied, already validated
against the JSON Schema); ``ctx`` carries the caller's identity, the server settings, the
process runtime (``impl/runtime.py``: every cache) and a cancellation flag the handler polls at
safe points.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Protocol

from knowspec.impl import runtime as process
from knowspec.impl.errors import cancelled


@dataclass(frozen=True)
class Caller:
    """Who is calling. A stdio MCP caller is ``unrestricted`` and sees every collection."""

    user: str = "stdio"
    roles: tuple[str, ...] = ()
    database: str | None = None
    unrestricted: bool = True

    def principals(self) -> frozenset[str]:
        """The ACL principal set ``{user, roles..., *}``, ASCII-lowercased."""
        names = {self.user, *self.roles, "*"}
        return frozenset(n.lower() for n in names if n)


class ItemwiseCheck(Protocol):
    """The tool's output check applied while its answer is built (``server/validation.ItemsCheck``)."""

    def item(self, value: Any) -> None: ...

    def finish(self, rest: dict[str, Any], count: int) -> None: ...


@dataclass
class CallContext:
    caller: Caller = field(default_factory=Caller)
    settings: Any = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    # The process state (caches, settings read from the environment): the server's runtime.
    runtime: process.Runtime = field(default_factory=process.current)
    # ``output_items_check(key)``: the tool's output check, made to take the items of the answer's
    # array ``key`` one at a time, for a handler that gives its answer as checked JSON
    # (``kept_answers.KeptOutput``) rather than values. Set by the pipeline; None outside it.
    output_items_check: Callable[[str], ItemwiseCheck] | None = None

    def check_cancelled(self, operation: str = "operation") -> None:
        """Raise ``operation_cancelled`` if the client cancelled or the deadline passed."""
        if self.cancel_event.is_set():
            raise cancelled(operation)


@dataclass(frozen=True)
class AnswerKey:
    """Where the pipeline keeps an answer once it is validated (``kept_answers``): ``key`` names
    it (the tool, the bundle root, the arguments the answer depends on), ``stamp`` says what it
    was made from (the snapshot's revision); an answer kept at another stamp is not given."""

    key: Hashable
    stamp: Any


@dataclass
class ToolOutput:
    """A successful result: ``structured`` becomes ``structuredContent``.

    ``text`` is the text-compatible content; when ``None`` the pipeline renders it from the
    tool table's rule (compact JSON of the structured content, or of its wrapped array).
    ``keep``: keep this answer under that key once it passed its output schema, for the
    handler to give again (``kept_answers.kept_output``).
    """

    structured: dict[str, Any]
    text: str | None = None
    keep: AnswerKey | None = None

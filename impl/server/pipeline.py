"""The one call pipeline every tool goes through (spec/okf/contract/read.md §3.0).

cancellation check → (in a worker thread, under the call deadline) raw-argument walk → JSON Schema validation (format assertion on) → input
model → handler in a worker thread (polling a cancellation flag) → output validation → result.
An answer its handler keeps (``kept_answers``: the same arguments on the same snapshot revision)
is validated and encoded once, then given again as its JSON.
Every failure on the way is a ``ToolError`` turned into an ``isError`` result by
``tool_results.error_result``; nothing here raises to the transport.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, overload

import anyio
import mcp.types as types

from knowspec.impl import runtime as process
from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext, Caller, ToolOutput
from knowspec.impl.errors import ToolError, not_implemented
from knowspec.impl.kept_answers import KeptAnswer, KeptOutput, keep_answer
from knowspec.impl.server.arguments import walk_arguments
from knowspec.impl.rules.sliced_json import json_pieces
from knowspec.impl.server.tool_results import (error_result, fallback_text, kept_result, materialized, success_result,
                                               wrapped_json_text)
from knowspec.impl.server.native_memory import HeapTrimmer
from knowspec.impl.server.validation import ItemsCheck, SchemaCheck, input_error, output_error

if TYPE_CHECKING:
    from knowspec.generated.registry import ToolEntry

log = logging.getLogger("knowspec.pipeline")

MAX_OUTPUT_BYTES = 64 * 1024 * 1024
Handler = Callable[[Any, CallContext], ToolOutput]
Finished = TypeVar("Finished")


def resolve_handler(entry: ToolEntry) -> Handler | None:
    """The impl function a registry entry names, or None when its module or function is not
    written yet (a revision may specify a tool first: it answers ``not_implemented``). Any other
    failure to import, such as a library the module needs, is a bug or a missing extra: it raises."""
    module_name, _, attr = entry.impl.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            return None
        raise
    return getattr(module, attr, None)


class LazyHandler:
    """A registry entry's handler, imported at its first call rather than at server start: a
    server that only answers OKF tools never loads the document tools' modules (numpy, the
    storages, the vector runtime), tens of MiB of its resident memory."""

    def __init__(self, entry: ToolEntry) -> None:
        self.entry = entry
        self.__name__ = entry.impl.partition(":")[2]
        self._handler: Handler | None = None
        self._resolved = False
        self._lock = threading.Lock()

    def resolved(self) -> Handler | None:
        if not self._resolved:
            with self._lock:  # two first calls import once (the import lock would serialise them anyway)
                if not self._resolved:
                    self._handler = resolve_handler(self.entry)
                    self._resolved = True
        return self._handler

    def is_written(self) -> bool:
        """Whether the handler exists, without importing it when it has not been called yet."""
        from knowspec.impl.handler_presence import is_written

        return self._handler is not None if self._resolved else is_written(self.entry.impl)

    def __call__(self, args: Any, ctx: CallContext) -> ToolOutput:
        handler = self.resolved()
        if handler is None:
            raise not_implemented(self.entry.name)
        return handler(args, ctx)


class AdmissionRefused(Exception):
    """An admission's refusal of a call before it ran (its caller has too much in flight)."""


class Admission(Protocol):
    """Who may run a call now (HTTP: ``caller_load.CallsPerCaller``): ``admit`` waits for the
    call's turn and answers its ticket, or raises ``AdmissionRefused``; ``release`` gets the
    ticket back once no thread of the call runs any more."""

    async def admit(self, key: str) -> Any: ...

    def release(self, key: str, ticket: Any) -> None: ...


class _ThreadRelease:
    """Runs ``release`` once, when no worker thread of the call runs: when the call returns, or,
    for a call answered while its thread ran on (cancelled, past its deadline), when that thread
    returns (on the event loop, through ``token``). A thread that had not started when its call
    was answered never runs the handler."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._lock = threading.Lock()
        self._released = False
        self._running = False
        self._closed = False
        self.abandoned = False
        self.token = anyio.lowlevel.current_token()

    def __call__(self) -> None:
        if not self._released:
            self._released = True
            self._release()

    def thread_starts(self) -> bool:
        """In the worker thread, before the work: whether it may run (its call is not answered)."""
        with self._lock:
            if self._closed:
                return False
            self._running = True
            return True

    def thread_returned(self) -> None:
        """In the worker thread, as it returns."""
        with self._lock:
            self._running = False
            late = self.abandoned
        if late:
            try:
                anyio.from_thread.run_sync(self, token=self.token)
            except RuntimeError:  # the event loop is gone: so is whatever the turn guarded
                pass

    def abandon(self) -> None:
        """The call is answered: a thread that has not started will not; one that runs releases
        as it returns."""
        with self._lock:
            self._closed = True
            self.abandoned = self._running


class ToolRuntime:
    """Registry entries bound to handlers and validators; one per server process. Every call's
    context carries ``process``, the process runtime (caches, settings read from the environment)."""

    def __init__(self, settings: Settings | None = None, entries: tuple[ToolEntry, ...] | None = None,
                 handlers: dict[str, Handler | None] | None = None, process_runtime: process.Runtime | None = None):
        if entries is None:
            from knowspec.generated.registry import TOOLS

            entries = TOOLS
        self.settings = settings or Settings()
        self.entries = {e.name: e for e in entries}
        self.order = [e.name for e in entries]
        self.handlers: dict[str, Handler | None] = (
            handlers if handlers is not None else {e.name: LazyHandler(e) for e in entries})
        self.process = process_runtime or process.current()
        # Tests set this to see a handler's unexpected exception instead of operation_rejected.
        self.raise_unexpected = self.process.settings.raise_unexpected
        self._input_checks: dict[str, SchemaCheck] = {}
        self._output_checks: dict[str, SchemaCheck] = {}
        self.heap = HeapTrimmer()

    def resolve_handlers(self, family: str) -> None:
        """Import now the handlers of ``family``'s tools that would load at their first call."""
        for name, entry in self.entries.items():
            handler = self.handlers.get(name)
            if entry.family == family and isinstance(handler, LazyHandler):
                handler.resolved()

    def implemented(self) -> dict[str, bool]:
        """Each tool's status: False for one with no handler, or whose ``impl`` is not written yet."""
        def written(handler: Handler | None) -> bool:
            return handler is not None and (not isinstance(handler, LazyHandler) or handler.is_written())

        return {name: written(self.handlers.get(name)) for name in self.order}

    def tool_list(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=e.name,
                title=e.title,
                description=e.description,
                input_schema=e.input_schema,
                output_schema=e.output_schema,
                annotations=types.ToolAnnotations.model_validate(e.annotations),
            )
            for e in (self.entries[n] for n in self.order)
        ]

    def _input_check(self, entry: ToolEntry) -> SchemaCheck:
        if entry.name not in self._input_checks:
            self._input_checks[entry.name] = SchemaCheck(entry.input_schema)
        return self._input_checks[entry.name]

    def _output_check(self, entry: ToolEntry) -> SchemaCheck:
        if entry.name not in self._output_checks:
            self._output_checks[entry.name] = SchemaCheck(entry.success_schema)
        return self._output_checks[entry.name]

    @overload
    async def call(self, name: str, arguments: dict[str, Any] | None, caller: Caller | None = None, *,
                   admission: Admission | None = None, admit_as: str = "") -> types.CallToolResult: ...

    @overload
    async def call(self, name: str, arguments: dict[str, Any] | None, caller: Caller | None,
                   finish: Callable[[types.CallToolResult], Finished], *, takes_json: bool = False,
                   admission: Admission | None = None, admit_as: str = "") -> Finished: ...

    async def call(self, name: str, arguments: dict[str, Any] | None, caller: Caller | None = None,
                   finish: Callable[[types.CallToolResult], Any] | None = None, *, takes_json: bool = False,
                   admission: Admission | None = None, admit_as: str = "") -> Any:
        """Run one tool call; ``name`` must be a known tool (the server checks that first).

        Everything after the first cancellation check (argument walk, both validations, the
        handler, and ``finish``: the transport's encoding of the result) runs in a worker thread
        under the call deadline, so no request, however hostile, holds the event loop. Only an
        error result made here (cancelled before it started, past its deadline) is finished on
        the loop: it is small. ``takes_json``: ``finish`` writes a kept answer's structured JSON
        as it is (``parked_answers``); any other gets the values decoded. ``admission`` (HTTP)
        admits the call as ``admit_as`` before anything runs (it may refuse: its exception goes to
        the caller) and is released once no thread of the call runs any more.
        """
        entry = self.entries[name]
        if admission is None:
            return await self._call(entry, arguments, caller, finish, takes_json, None)
        ticket = await admission.admit(admit_as)
        release = _ThreadRelease(lambda: admission.release(admit_as, ticket))
        try:
            return await self._call(entry, arguments, caller, finish, takes_json, release)
        finally:
            if not release.abandoned:
                release()

    async def _call(self, entry: ToolEntry, arguments: dict[str, Any] | None, caller: Caller | None,
                    finish: Callable[[types.CallToolResult], Any] | None, takes_json: bool,
                    release: _ThreadRelease | None) -> Any:
        ctx = CallContext(caller=caller or Caller(), settings=self.settings, cancel_event=threading.Event(),
                          runtime=self.process,
                          output_items_check=lambda key: ItemsCheck(self._output_check(entry), key))
        given: Callable[[types.CallToolResult], Any] = finish if finish is not None else _unchanged
        finished = given if takes_json else (lambda result: given(materialized(result)))
        try:
            ctx.check_cancelled(f"{entry.name} request")
            return await self._in_thread(
                entry, lambda: finished(self._call_sync(entry, {} if arguments is None else arguments, ctx)), ctx,
                release)
        except ToolError as err:
            return finished(error_result(err))

    def _call_sync(self, entry: ToolEntry, arguments: Any, ctx: CallContext) -> types.CallToolResult:
        walked = {"values": 0, "bytes": 0}
        started = time.thread_time()
        try:
            result = self._success(entry, self._run(entry, arguments, ctx, walked))
        except ToolError as err:
            result = error_result(err)
        self.heap.after_call(walked["bytes"] + sum(len(getattr(c, "text", "")) for c in result.content),
                             time.thread_time() - started)
        return result

    def _run(self, entry: ToolEntry, arguments: Any, ctx: CallContext, walked: dict[str, int]) -> ToolOutput:
        walk_arguments(arguments, walked)
        errors = self._input_check(entry).errors(arguments)
        if errors:
            raise input_error(errors)
        handler = self.handlers.get(entry.name)
        if handler is None:
            raise not_implemented(entry.name)
        args = entry.input_model.model_validate(arguments)
        output = handler(args, ctx)
        if isinstance(output, KeptOutput):
            return output  # validated when it was kept
        if output is None:
            raise ToolError("schema_validation", "tool handler returned no result")
        if not isinstance(output, ToolOutput):
            output = ToolOutput(structured=output)
        ctx.check_cancelled(f"{entry.name} request")
        errors = self._output_check(entry).errors(output.structured)
        if errors:
            log.error("%s returned output that fails its schema: %s", entry.name, errors[0].message)
            raise output_error(errors)
        return output

    async def _in_thread(self, entry: ToolEntry, call: Callable[[], Any], ctx: CallContext,
                         release: _ThreadRelease | None = None) -> Any:
        def work() -> Any:
            if release is not None and not release.thread_starts():
                return None  # its call was answered (cancelled) before this thread began
            try:
                return call()
            except ToolError:
                raise
            except Exception:  # a bug must not crash the session or leak internals
                log.exception("tool %s failed unexpectedly", entry.name)
                if self.raise_unexpected:
                    raise
                raise ToolError("operation_rejected", "tool operation was rejected") from None
            finally:
                if release is not None:
                    release.thread_returned()

        try:
            with anyio.fail_after(self.settings.call_timeout_seconds):
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except TimeoutError:
            ctx.cancel_event.set()
            if release is not None:
                release.abandon()  # its turn stays taken until the thread returns
            raise ToolError("operation_cancelled", f"{entry.name} request was cancelled", retryable=True) from None
        except anyio.get_cancelled_exc_class():
            ctx.cancel_event.set()  # the worker stops at its next check; nothing is answered
            if release is not None:
                release.abandon()
            raise

    def _success(self, entry: ToolEntry, output: ToolOutput) -> types.CallToolResult:
        if isinstance(output, KeptOutput):
            return kept_result(output.answer)
        text, structured_json = output.text, None
        if text is None:
            # One encoding gives both the wrapped value's text and the structured content's JSON,
            # which the answer's parking reuses instead of encoding the same values again.
            both = wrapped_json_text(output.structured, entry.wrap, entry.text_encoder)
            if both is not None:
                structured_json, text = both
        if text is None:
            text = fallback_text(output.structured[entry.wrap] if entry.wrap else output.structured, entry.text_encoder)
        if len(text.encode("utf-8")) > MAX_OUTPUT_BYTES:
            raise_limit = ToolError("resource_limit", "tool output exceeds MCP resource limits")
            return error_result(raise_limit)
        if output.keep is not None:
            answer = _answer_to_keep(output, text, structured_json)
            if answer is not None:
                keep_answer(self.process, output.keep, answer)
                return kept_result(answer, output.structured, text)
        return success_result(output.structured, text, structured_json)


def _answer_to_keep(output: ToolOutput, text: str, structured_json: str | None) -> KeptAnswer | None:
    """The validated answer a handler named a key for, as kept (``kept_answers``); None for one
    JSON cannot carry (NaN) or whose JSON has no UTF-8 (a lone surrogate). Encoded in short
    pieces, never as one ``str`` (a character past the BMP makes a str four bytes a character)."""
    try:
        if structured_json is not None:
            encoded = structured_json.encode("utf-8")
        else:
            encoded = b"".join(piece.encode("utf-8") for piece in json_pieces(output.structured))
        return KeptAnswer.of(text, encoded)
    except (TypeError, ValueError):  # UnicodeEncodeError among them
        return None


def _unchanged(result: types.CallToolResult) -> types.CallToolResult:
    return result

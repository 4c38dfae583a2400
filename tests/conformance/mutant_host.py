"""Serve knowspec with one switchable mutant applied in-process, for ``knowspec conform mutants``.

``python tests/conformance/mutant_host.py --control FILE [--pool DIR] (--stdio | --http HOST:PORT)``

The active mutant is the name written in FILE (``identity``: none), re-read whenever the file
changes, so one server process serves a whole kill-rate run. A name from
``conformance.mutants.catalogue.MUTANTS`` edits each JSON-RPC answer as the stdio proxy would; a
name from ``server_catalogue.SERVER_MUTANTS`` swaps one handler of the tool runtime for a broken
one (compare-and-swap skipped, ACL applied after ranking, query folding, ...). ``--pool DIR``
serves a pool fixture written by ``knowspec conform fixture`` (registered as its database).
Lives under tests/: it imports the server, which the conformance package never does.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import mcp.types as types
from mcp.shared.exceptions import MCPError

import knowspec.impl.server.mcp_server as mcp_server
from knowspec.conformance.mutants.catalogue import MUTANTS
from knowspec.conformance.mutants.server_catalogue import SERVER_MUTANTS
from knowspec.impl.config import Settings
from knowspec.impl.context import Caller, CallContext, ToolOutput
from knowspec.impl.errors import ToolError
from knowspec.impl.server.pipeline import ToolRuntime

Handler = Callable[[Any, CallContext], ToolOutput]


class Switch:
    """The active mutant, read from the control file when it changes; applies and undoes patches."""

    def __init__(self, control: Path, runtime: ToolRuntime) -> None:
        self.control, self.runtime = control, runtime
        self.originals = dict(runtime.handlers)
        self.current = dict(self.originals)
        self.name, self.stamp, self.state = "identity", None, {}
        self.undo: list[Callable[[], None]] = []
        # The server copies the handler table (e.g. the HTTP app's access guard wraps each
        # handler once), so every entry becomes a dispatcher to the active mutant's handler.
        for tool, handler in self.originals.items():
            if handler is not None:
                runtime.handlers[tool] = self._dispatcher(tool)

    def _dispatcher(self, tool: str) -> Handler:
        def run(args: Any, ctx: CallContext) -> ToolOutput:
            return self.current[tool](args, ctx)
        run.__name__ = tool
        return run

    def active(self) -> str:
        try:
            st = os.stat(self.control)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self.stamp:
            self.stamp = stamp
            name = self.control.read_text(encoding="utf-8").strip() if stamp else "identity"
            if name != self.name:
                self.switch(name)
        return self.name

    def switch(self, name: str) -> None:
        for undo in reversed(self.undo):
            undo()
        self.undo.clear()
        self.current = dict(self.originals)
        self.name, self.state = name, {}
        if name in SERVER_MUTANTS:
            SERVER_PATCHES[name](self)

    def wrap(self, tool: str, make: Callable[[Handler], Handler]) -> None:
        self.current[tool] = make(self.originals[tool])

    def setattr(self, target: Any, attr: str, value: Any) -> None:
        old = getattr(target, attr)
        setattr(target, attr, value)
        self.undo.append(lambda: setattr(target, attr, old))


# ---- server mutants: each breaks one rule inside the server --------------------------------------

def _dump(args: Any) -> dict[str, Any]:
    return args.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _model(switch: Switch, tool: str, data: dict[str, Any]) -> Any:
    return switch.runtime.entries[tool].input_model.model_validate(data)


def _live(switch: Switch, preview: str, args: Any, drop: tuple[str, ...], ctx: CallContext) -> dict[str, Any]:
    """What the preview tool says about the live bundle for the same request."""
    data = {k: v for k, v in _dump(args).items() if k not in drop}
    return switch.originals[preview](_model(switch, preview, data), ctx).structured


def _substituted(switch: Switch, tool: str, preview: str, drop: tuple[str, ...],
                 fields: dict[str, str]) -> None:
    def make(handler: Handler) -> Handler:
        def run(args: Any, ctx: CallContext) -> ToolOutput:
            live = _live(switch, preview, args, drop, ctx)
            update = {field: live.get(source) for field, source in fields.items() if live.get(source)}
            return handler(_model(switch, tool, {**_dump(args), **update}), ctx)
        return run
    switch.wrap(tool, make)


def _args_edit(switch: Switch, tool: str, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    switch.wrap(tool, lambda handler: lambda args, ctx: handler(_model(switch, tool, edit(_dump(args))), ctx))


def _unrestricted(switch: Switch, tool: str) -> None:
    switch.wrap(tool, lambda handler: lambda args, ctx: handler(
        args, dataclasses.replace(ctx, caller=Caller(user="mutant", unrestricted=True))))


def _drops_body(s: Switch) -> None:
    _args_edit(s, "write_concept", lambda a: {**a, "body": ""})


def _refusal_leaves_file(s: Switch) -> None:
    def make(handler: Handler) -> Handler:
        def run(args: Any, ctx: CallContext) -> ToolOutput:
            try:
                return handler(args, ctx)
            except ToolError:
                path = Path(args.bundle_path) / f"{args.concept_id}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"---\n{args.frontmatter}\n---\n{args.body}", encoding="utf-8")
                raise
        return run
    s.wrap("write_concept", make)


def _preview_writes(s: Switch) -> None:
    def make(handler: Handler) -> Handler:
        def run(args: Any, ctx: CallContext) -> ToolOutput:
            out = handler(args, ctx)
            plan = out.structured
            if plan.get("status") == "applicable":
                apply = {**_dump(args), "expected_revision": plan["base_revision"],
                         "expected_plan_digest": plan["plan_digest"]}
                s.originals["apply_concept_patch"](_model(s, "apply_concept_patch", apply), ctx)
            return out
        return run
    s.wrap("preview_concept_patch", make)


def _day_early(a: dict[str, Any]) -> dict[str, Any]:
    as_of = a.get("as_of")
    if isinstance(as_of, str) and len(as_of) == 10:
        a = {**a, "as_of": (datetime.date.fromisoformat(as_of) - datetime.timedelta(days=1)).isoformat()}
    return a


def _keeps_dotless_i(s: Switch) -> None:
    import knowspec.impl.rules.fts_query as fts_query

    original = fts_query.fold
    s.setattr(fts_query, "fold", lambda text: "ı".join(original(part) for part in text.split("ı")))


def _acl_after_ranking(s: Switch) -> None:
    def make(handler: Handler) -> Handler:
        def run(args: Any, ctx: CallContext) -> ToolOutput:
            everyone = dataclasses.replace(ctx, caller=Caller(user="mutant", unrestricted=True))
            out = handler(args, everyone)
            kept = []
            for row in out.structured.get("results") or []:
                probe = {"collection": row["collection"], "slug": row["slug"]}
                if getattr(args, "database", None):
                    probe["database"] = args.database
                try:
                    s.originals["doc_get"](_model(s, "doc_get", probe), ctx)
                except ToolError:
                    continue
                kept.append(row)
            return ToolOutput(structured={**out.structured, "results": kept})
        return run
    s.wrap("doc_search", make)


def _help_stats_plus(s: Switch) -> None:
    def make(handler: Handler) -> Handler:
        def run(args: Any, ctx: CallContext) -> ToolOutput:
            out = copy.deepcopy(handler(args, ctx).structured)
            out["counts"]["topic"] += 1
            return ToolOutput(structured=out)
        return run
    s.wrap("help_stats", make)


# ---- REST mutants: the session gate, statuses, envelope, body cap and IMPORTDOC -------------------

def _rest_modules() -> tuple[Any, Any, Any, Any, Any]:
    from knowspec.impl.docpool import auth, importdoc
    from knowspec.impl.rest import admin, session_endpoints, tool_endpoints

    return auth, importdoc, admin, session_endpoints, tool_endpoints


def _any_password(s: Switch) -> None:
    auth = _rest_modules()[0]
    s.setattr(auth, "authenticate", lambda catalog, user, password: auth.get_user(catalog, user))


def _session_gate(s: Switch, module: Any, make: Callable[[Callable], Callable]) -> None:
    s.setattr(module, "require_session", make(module.require_session))


def _anonymous_session(require: Callable) -> Callable:
    from knowspec.impl.rest.sessions import Session

    def gate(request: Any, sessions: Any, **kwargs: Any) -> Any:
        try:
            return require(request, sessions, **kwargs)
        except ToolError:
            return Session("", "", (), None, float("inf"))
    return gate


def _forbidden_without_session(require: Callable) -> Callable:
    def gate(request: Any, sessions: Any, **kwargs: Any) -> Any:
        try:
            return require(request, sessions, **kwargs)
        except ToolError as exc:
            raise ToolError("forbidden", exc.message) from None
    return gate


def _unrestricted_session(require: Callable) -> Callable:
    class Everyone:
        def __init__(self, session: Any) -> None:
            self.session = session

        def __getattr__(self, name: str) -> Any:
            return getattr(self.session, name)

        def caller(self) -> Caller:
            return Caller(user=self.session.user, roles=self.session.roles, database=self.session.database,
                          unrestricted=True)
    return lambda request, sessions, **kwargs: Everyone(require(request, sessions, **kwargs))


def _no_sysadmin_gate(s: Switch) -> None:
    admin = _rest_modules()[2]
    require = admin.require_session
    s.setattr(admin, "require_session", lambda request, sessions, **kwargs: require(request, sessions))
    s.setattr(admin, "_still_sysadmin", lambda settings, sessions, session: None)


def _logout_keeps(s: Switch) -> None:
    from knowspec.impl.rest.sessions import SessionStore

    s.setattr(SessionStore, "close", lambda self, token: True)


def _errors_answer_400(s: Switch) -> None:
    s.setattr(_rest_modules()[4], "STATUS_BY_CODE", {})


def _generic_code(s: Switch) -> None:
    from starlette.responses import JSONResponse

    tool_endpoints = _rest_modules()[4]
    call = tool_endpoints.call_tool

    async def generic(*args: Any, **kwargs: Any) -> Any:
        response = await call(*args, **kwargs)
        if response.status_code < 400:
            return response
        body = json.loads(response.body)
        return JSONResponse({**body, "code": "invalid_request"}, status_code=response.status_code)
    s.setattr(tool_endpoints, "call_tool", generic)


def _body_cap_off(s: Switch) -> None:
    from knowspec.impl.server.body_limits import BodyLimitMiddleware

    async def passthrough(self: Any, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)
    s.setattr(BodyLimitMiddleware, "__call__", passthrough)


def _refusal_names_path(s: Switch) -> None:
    _, importdoc, admin, _, _ = _rest_modules()
    refusal = importdoc.source_refusal
    s.setattr(importdoc, "source_refusal", lambda source, collection, shown=None: refusal(source.absolute(), collection))
    s.setattr(admin, "redact_message", lambda message: message)


PATCH_DROP = ("expected_revision", "expected_plan_digest")
V02_DROP = ("expected_source", "proof", "expected_plan_digest")
SERVER_PATCHES: dict[str, Callable[[Switch], None]] = {
    "write_concept_drops_body": _drops_body,
    "write_concept_refusal_leaves_file": _refusal_leaves_file,
    "apply_patch_no_compare_and_swap": lambda s: _substituted(
        s, "apply_concept_patch", "preview_concept_patch", PATCH_DROP, {"expected_revision": "base_revision"}),
    "apply_patch_ignores_plan_digest": lambda s: _substituted(
        s, "apply_concept_patch", "preview_concept_patch", PATCH_DROP, {"expected_plan_digest": "plan_digest"}),
    "preview_patch_writes": _preview_writes,
    "apply_temporal_no_compare_and_swap": lambda s: _substituted(
        s, "apply_temporal_upgrade", "preview_temporal_upgrade", ("base_revision", "plan_digest"),
        {"base_revision": "base_revision"}),
    "apply_v02_ignores_plan_digest": lambda s: _substituted(
        s, "apply_v02_migration", "preview_v02_migration", V02_DROP, {"expected_plan_digest": "plan_digest"}),
    "list_concepts_as_of_day_early": lambda s: _args_edit(s, "list_concepts", _day_early),
    "search_sections_limit_ignored": lambda s: _args_edit(s, "search_sections", lambda a: {**a, "limit": 100}),
    "query_fold_keeps_dotless_i": _keeps_dotless_i,
    "doc_search_acl_after_ranking": _acl_after_ranking,
    "doc_search_ignores_acl": lambda s: _unrestricted(s, "doc_search"),
    "doc_get_ignores_acl": lambda s: _unrestricted(s, "doc_get"),
    "doc_entity_counts_hidden_topics": lambda s: _unrestricted(s, "doc_entity"),
    "doc_links_ignores_acl": lambda s: _unrestricted(s, "doc_links"),
    "doc_stats_counts_restricted": lambda s: _unrestricted(s, "doc_stats"),
    "doc_collections_counts_restricted": lambda s: _unrestricted(s, "doc_collections"),
    "help_stats_counts_document_pool": _help_stats_plus,
    "help_search_ignores_module": lambda s: _args_edit(s, "help_search", lambda a: {k: v for k, v in a.items()
                                                                                     if k != "module"}),
    "doc_entities_limit_off_by_one": lambda s: _args_edit(
        s, "doc_entities", lambda a: {**a, "limit": a.get("limit", 20) + 1} if a.get("kind") or a.get("q") else a),
}
SERVER_PATCHES.update({
    "rest_login_accepts_wrong_password": _any_password,
    "rest_doc_without_session": lambda s: _session_gate(s, _rest_modules()[4], _anonymous_session),
    "rest_no_session_answers_403": lambda s: _session_gate(s, _rest_modules()[4], _forbidden_without_session),
    "rest_logout_keeps_session": _logout_keeps,
    "rest_tool_errors_answer_400": _errors_answer_400,
    "rest_envelope_code_generic": _generic_code,
    "rest_body_cap_off": _body_cap_off,
    "rest_doc_calls_ignore_acl": lambda s: _session_gate(s, _rest_modules()[4], _unrestricted_session),
    "importdoc_without_sysadmin": _no_sysadmin_gate,
    "importdoc_refusal_leaks_path": _refusal_names_path,
})
assert set(SERVER_PATCHES) == set(SERVER_MUTANTS), set(SERVER_PATCHES) ^ set(SERVER_MUTANTS)


# ---- response mutants: the catalogue's JSON-RPC edits, applied before the transport --------------

def mutant_server_class(switch: Switch) -> type:
    base = mcp_server.Server

    class MutantServer(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, on_list_tools: Any = None, on_call_tool: Any = None, **kwargs: Any) -> None:
            async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
                result = await on_list_tools(ctx, params)
                edited = _edit(switch, {"jsonrpc": "2.0", "id": 0, "method": "tools/list"},
                               {"jsonrpc": "2.0", "id": 0, "result": result.model_dump(mode="json", by_alias=True,
                                                                                      exclude_none=True)})
                return types.ListToolsResult.model_validate(edited["result"])

            async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
                switch.active()
                request = {"jsonrpc": "2.0", "id": 0, "method": "tools/call",
                           "params": {"name": params.name, "arguments": params.arguments or {}}}
                try:
                    result = await on_call_tool(ctx, params)
                    response = {"jsonrpc": "2.0", "id": 0,
                                "result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}
                except MCPError as exc:
                    response = {"jsonrpc": "2.0", "id": 0, "error": {"code": exc.code, "message": exc.message}}
                response = _edit(switch, request, response)
                if "error" in response:
                    raise MCPError(code=response["error"]["code"], message=response["error"]["message"])
                return types.CallToolResult.model_validate(response["result"])

            super().__init__(*args, on_list_tools=list_tools, on_call_tool=call_tool, **kwargs)

    return MutantServer


def _edit(switch: Switch, request: dict, response: dict) -> dict:
    mutation = MUTANTS.get(switch.active())
    return mutation.mutate(request, response, switch.state) if mutation is not None else response


# ---- serving ----------------------------------------------------------------------------------

def register_pool(directory: Path, settings: Settings) -> None:
    """Serve DIR/docs.db as the fixture's database (and a copy as ``<database>rest``), DIR/help.db
    as the help pool."""
    from knowspec.impl.docpool import catalog

    manifest = json.loads((directory / "fixture.json").read_text(encoding="utf-8"))
    database = manifest.get("database") or "conform"
    settings.appdir = directory
    settings.help_db = directory / "help.db"
    settings.catalog_db = directory / "catalog.db"
    settings.default_database = database
    # <database>rest: a copy REST runs import into (IMPORTDOC adds collections, which the pool
    # oracles of the other mutants, judging exact counts on <database>, must never see).
    shutil.copyfile(directory / "docs.db", directory / "rest-docs.db")
    for name, pool in ((database, "docs.db"), (f"{database}rest", "rest-docs.db")):
        if catalog.get_database(settings.catalog_db, name) is None:
            catalog.register_database(settings.catalog_db, name, "SQLITE", str(directory / pool))
            catalog.execute_alter(settings.catalog_db, f"ALTER DATABASE {name} SET DOCUMENTS INTERNAL")


def add_vectors(directory: Path) -> None:
    """Give the fixture's pools vectors: a tiny random e5-style pack built offline from
    ``tests/vectors/synth_models.py`` (its vectors mean nothing, but they run the real tokenizer
    and ONNX path) in the pools' model folder, and a vector for every topic and chunk, so that
    vector and hybrid searches answer with scores the ordering checks can judge."""
    import re
    import sqlite3

    from rich.console import Console

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from vectors.synth_models import random_weights, write_hf_folder

    from knowspec.impl.docpool.vectors.embedder import load_embedder
    from knowspec.impl.docpool.vectors.onnx_graph import BertShape
    from knowspec.impl.docpool.vectors.pack_builder import SANITY_PAIRS, VERIFY_SENTENCES, build_pack
    from knowspec.impl.docpool.vectors.pool_embed import embed_pool

    pools = [directory / "docs.db", directory / "help.db"]
    text = " ".join(VERIFY_SENTENCES + [q for q, _ in SANITY_PAIRS] + [p for _, p in SANITY_PAIRS] + ["query passage"])
    for pool in pools:
        with sqlite3.connect(pool) as con:
            text += " " + " ".join(" ".join(filter(None, row)) for row in con.execute(
                'select t.title, ch.heading, ch.body from "doc$chunk" ch join "doc$topic" t on t.id = ch.topic_id'))
    words = sorted(set(re.findall(r"\w+", text.lower())))
    shape = BertShape(hidden=128, layers=2, heads=4, ffn=256, eps=1e-12)
    folder = write_hf_folder(directory / "tiny-bert", random_weights(shape, vocab=len(words) + 4, max_pos=40, seed=1),
                             words)
    pack = directory / "models" / "e5-int8"
    build_pack(f"hf:{folder}", pack, console=Console(file=open(os.devnull, "w")), min_mean_cosine=-1.0)
    embedder = load_embedder(pack)
    for pool in pools:
        with sqlite3.connect(pool) as con:
            embed_pool(con, embedder)
    manifest = directory / "fixture.json"   # the oracles expect one vector per topic and chunk now
    manifest.write_text(json.dumps({**json.loads(manifest.read_text(encoding="utf-8")), "vectors": True}) + "\n",
                        encoding="utf-8")


def create_users(settings: Settings, admin: str | None, reader: str | None) -> None:
    """A SYSADMIN and a reader (another role) for the REST checks and the bearer-token MCP writes."""
    from knowspec.impl.docpool import auth

    cost, auth.SCRYPT_N = auth.SCRYPT_N, 2**8  # the hash keeps its own parameters: cheap logins
    try:
        for spec, roles in ((admin, ["SYSADMIN"]), (reader, ["Muhasebe"])):
            if spec:
                user, _, password = spec.partition(":")
                auth.create_user(settings.catalog_path, user, password, roles)
    finally:
        auth.SCRYPT_N = cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mutant_host")
    parser.add_argument("--control", type=Path, required=True, help="file naming the active mutant")
    parser.add_argument("--pool", type=Path, default=None, help="a pool fixture dir (knowspec conform fixture)")
    parser.add_argument("--appdir", type=Path, default=None)
    parser.add_argument("--vectors", action="store_true",
                        help="with --pool: a tiny offline model pack and vectors for the pools (vector/hybrid search)")
    parser.add_argument("--admin", metavar="USER:PASSWORD", default=None, help="create this SYSADMIN user")
    parser.add_argument("--reader", metavar="USER:PASSWORD", default=None, help="create this non-admin user")
    parser.add_argument("--bundle-root", type=Path, action="append", default=None,
                        help="OKF bundles served over HTTP live under here (default: the temp dir the suite writes to)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true")
    mode.add_argument("--http", metavar="HOST:PORT")
    ns = parser.parse_args(argv)
    ns.bundle_root = ns.bundle_root or [Path(tempfile.gettempdir())]
    settings = Settings()
    settings.allow_anonymous = True   # the suite judges anonymous MCP callers (principals {*})
    settings.bundle_roots = tuple(root.absolute() for root in ns.bundle_root)
    if ns.appdir:
        settings.appdir = ns.appdir.absolute()
    if ns.pool:
        register_pool(ns.pool.absolute(), settings)
        if ns.vectors:
            add_vectors(ns.pool.absolute())
    create_users(settings, ns.admin, ns.reader)
    runtime = ToolRuntime(settings)
    switch = Switch(ns.control.absolute(), runtime)
    mcp_server.Server = mutant_server_class(switch)
    # Response mutants edit a call's result on its way to the transport; an answer parked for
    # off-loop encoding (parked_answers.py) reaches them as a placeholder, so the host never parks.
    mcp_server.parks_answers_for = lambda protocol_version: False
    if ns.http:
        import uvicorn

        from knowspec.impl.server.http_app import build_app

        host, _, port = ns.http.rpartition(":")
        app = build_app(runtime, host=host)

        async def switched(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":   # REST requests switch mutants too (MCP calls do in call_tool)
                switch.active()
            await app(scope, receive, send)

        uvicorn.run(switched, host=host, port=int(port), log_level="warning")
        return 0
    import anyio

    anyio.run(mcp_server.serve_stdio, runtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The mutations: each takes (request, response, state) and returns the response to forward.

A mutation edits a ``tools/call`` or ``tools/list`` response in place of the server. When it
changes ``structuredContent`` it re-renders a JSON text fallback too, so that only the one
targeted rule breaks (a mutant should be killed by the rule it names, not by a side effect).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable

Mutation = Callable[[dict, dict, dict], dict]


@dataclass(frozen=True)
class Mutant:
    name: str
    rule: str            # the contract rule it breaks
    mutate: Mutation
    killed_by: tuple[str, ...] = ()   # checks expected to notice
    tools: tuple[str, ...] = ()       # the tools whose cases can notice (the kill-rate run checks only these)
    kind: str = ""                    # the contract kind: ordering, limits, errors, schemas, acl, ...


MUTANTS: dict[str, Mutant] = {}
# Cross-cutting mutants (errors, envelopes, listing, text) are judged on a few representative tools.
CROSS_TOOLS = ("search_concepts", "help_get_topic")


def mutant(name: str, rule: str, killed_by: tuple[str, ...] = (), tools: tuple[str, ...] | None = None,
           kind: str = "") -> Callable[[Mutation], Mutation]:
    def register(func: Mutation) -> Mutation:
        if name in MUTANTS:
            raise ValueError(f"mutant {name!r} registered twice")
        MUTANTS[name] = Mutant(name, rule, func, killed_by, tools or getattr(func, "tools", None) or CROSS_TOOLS,
                               kind or _kind_of(name))
        return func

    return register


def _kind_of(name: str) -> str:
    """A first-batch mutant's contract kind, from its name."""
    for word, kind in (("list_", "schemas"), ("order", "ordering"), ("reverse", "ordering"), ("swap", "ordering"),
                       ("ties", "ordering"), ("truncated", "limits"), ("limit", "limits"), ("total", "limits"),
                       ("drop", "results"), ("envelope", "errors"), ("error", "errors"), ("retryable", "errors"),
                       ("leak", "errors"), ("diagnostics", "errors"), ("unknown_tool", "protocol"),
                       ("text", "protocol"), ("key_order", "protocol"), ("stale", "protocol"),
                       ("extra", "schemas"), ("card", "schemas"), ("echo", "results")):
        if word in name:
            return kind
    return "results"


# ---- helpers ----------------------------------------------------------------------------------
def tool_of(request: dict) -> str:
    return (request.get("params") or {}).get("name", "") if request.get("method") == "tools/call" else ""


def args_of(request: dict) -> dict:
    return (request.get("params") or {}).get("arguments") or {}


def result(response: dict) -> dict | None:
    res = response.get("result")
    return res if isinstance(res, dict) else None


def success(response: dict) -> dict | None:
    res = result(response)
    if res and not res.get("isError") and isinstance(res.get("structuredContent"), dict):
        return res["structuredContent"]
    return None


def envelope(response: dict) -> dict | None:
    res = result(response)
    if res and res.get("isError") and isinstance(res.get("structuredContent"), dict):
        return res["structuredContent"]
    return None


def set_structured(response: dict, new: dict) -> dict:
    """Replace structuredContent, keeping a JSON text fallback in step with it."""
    out = copy.deepcopy(response)
    res = out["result"]
    old = res.get("structuredContent")
    res["structuredContent"] = new
    for item in res.get("content", []):
        if item.get("type") == "text":
            try:
                text = json.loads(item["text"])
            except (ValueError, TypeError):
                continue
            if text == old:
                item["text"] = json.dumps(new, ensure_ascii=False, separators=(",", ":"))
            elif isinstance(old, dict) and "results" in old and text == old["results"]:
                # a wrapped tool's text is the bare array (the tool table's ``wrap``)
                item["text"] = json.dumps(new["results"], ensure_ascii=False, separators=(",", ":"))
    return out


def edit_success(tool: str, edit: Callable[[dict], bool]) -> Mutation:
    """A mutation that applies ``edit`` (returns True when it changed something) to one tool's successes."""

    def mutate(request: dict, response: dict, state: dict) -> dict:
        out = success(response)
        if tool_of(request) != tool or out is None:
            return response
        new = copy.deepcopy(out)
        return set_structured(response, new) if edit(new) else response

    mutate.tools = (tool,)  # type: ignore[attr-defined]
    return mutate


def edit_error(edit: Callable[[dict, dict], bool]) -> Mutation:
    def mutate(request: dict, response: dict, state: dict) -> dict:
        env = envelope(response)
        if env is None:
            return response
        new = copy.deepcopy(env)
        return set_structured(response, new) if edit(new, request) else response

    return mutate


def _reverse(key: str) -> Callable[[dict], bool]:
    def edit(out: dict) -> bool:
        items = out.get(key)
        if isinstance(items, list) and len(items) > 1 and items != items[::-1]:
            out[key] = items[::-1]
            return True
        return False

    return edit


def _drop_last(key: str) -> Callable[[dict], bool]:
    def edit(out: dict) -> bool:
        if out.get(key):
            out[key] = out[key][:-1]
            return True
        return False

    return edit


# ---- search_concepts --------------------------------------------------------------------------
def _flip(out: dict) -> bool:
    out["truncated"] = not out.get("truncated")
    return True


def _total_plus_one(out: dict) -> bool:
    out["total"] = out.get("total", 0) + 1
    out["truncated"] = True
    return True


def _wrong_match(out: dict) -> bool:
    for hit in out.get("hits", []):
        if hit.get("match") != "body":
            hit["match"] = "body"
            return True
    return False


def _extra_field(out: dict) -> bool:
    out["debug_info"] = "proxy"
    return True


def _hits_over_limit(out: dict) -> bool:
    hits = out.get("hits", [])
    if hits:
        out["hits"] = hits + hits[-1:]
        out["total"] = max(out.get("total", 0), len(out["hits"]))
        return True
    return False


mutant("search_drop_hit_keep_total", "hits hold the first limit matches; total counts all",
       ("differential_search", "truncation"))(edit_success("search_concepts", _drop_last("hits")))
mutant("search_flip_truncated", "truncated = total > len(hits)", ("truncation", "differential_search"))(
    edit_success("search_concepts", _flip))
mutant("search_reverse_hits", "hits ordered by match priority then id", ("result_ordering",))(
    edit_success("search_concepts", _reverse("hits")))
mutant("search_total_plus_one", "total counts exactly the matches", ("differential_search",))(
    edit_success("search_concepts", _total_plus_one))
mutant("search_wrong_match_field", "match names the highest-priority field", ("differential_search",))(
    edit_success("search_concepts", _wrong_match))
mutant("search_extra_output_field", "output objects are closed (additionalProperties false)",
       ("output_schema",))(edit_success("search_concepts", _extra_field))
mutant("search_hits_over_limit", "at most limit hits", ("truncation",))(
    edit_success("search_concepts", _hits_over_limit))

# ---- get_neighbors ----------------------------------------------------------------------------


def _swap_kind(out: dict) -> bool:
    for edge in out.get("edges", []):
        if edge.get("kind") == "navigation":
            edge["kind"] = "relation"
            edge["relation_type"] = "links_to"
            return True
    return False


mutant("neighbors_reverse_edges", "edges ordered by kind, from, to, type", ("result_ordering",))(
    edit_success("get_neighbors", _reverse("edges")))
mutant("neighbors_reverse_sources", "sources ordered by id, resource, title", ("result_ordering",))(
    edit_success("get_neighbors", _reverse("sources")))
mutant("neighbors_drop_edge_keep_total", "edges hold the first limit edges", ("differential_neighbors",))(
    edit_success("get_neighbors", _drop_last("edges")))
mutant("neighbors_kind_swap", "navigation edges are navigation", ("differential_neighbors",))(
    edit_success("get_neighbors", _swap_kind))
mutant("neighbors_flip_truncated", "truncated = total > len(edges)", ("truncation",))(
    edit_success("get_neighbors", _flip))

# ---- errors -----------------------------------------------------------------------------------


def _recode(src: str, dst: str) -> Callable[[dict, dict], bool]:
    def edit(env: dict, request: dict) -> bool:
        if env.get("code") == src:
            env["code"] = dst
            return True
        return False

    return edit


def _leak(env: dict, request: dict) -> bool:
    path = args_of(request).get("bundle_path")
    if isinstance(path, str) and path.startswith("/"):
        env["message"] = f"{env.get('message', '')} ({path})"
        return True
    return False


def _leak_server_state(env: dict, request: dict) -> bool:
    """Another folder of the server's (not the bundle the caller named) in the message."""
    env["message"] = f"{env.get('message', '')} (server state /var/lib/okf-server/catalog.db)"
    return True


def _drop_diagnostics(env: dict, request: dict) -> bool:
    env.pop("diagnostics", None)
    return True


def _retryable(env: dict, request: dict) -> bool:
    if env.get("code") != "operation_cancelled":
        env["retryable"] = True
        return True
    return False


def _many_diagnostics(env: dict, request: dict) -> bool:
    diags = env.get("diagnostics") or []
    if env.get("code") in ("schema_validation", "resource_limit") and diags:
        env["diagnostics"] = (diags * 9)[:9]
        return True
    return False


mutant("limit_error_as_schema_validation", "limit keywords give resource_limit", ("boundary_limits",))(
    edit_error(_recode("resource_limit", "schema_validation")))
mutant("schema_error_as_invalid_request", "schema failures give schema_validation",
       ("input_invalid_rejected",))(edit_error(_recode("schema_validation", "invalid_request")))
mutant("leak_bundle_path", "no absolute path in error messages", ("no_path_leakage",))(edit_error(_leak))
mutant("leak_server_path", "no local path in error messages (read.md §4.4)", ("no_path_leakage",))(
    edit_error(_leak_server_state))
mutant("envelope_without_diagnostics", "the envelope always carries diagnostics", ("output_schema",))(
    edit_error(_drop_diagnostics))
mutant("errors_retryable", "only cancellation is retryable", ("output_schema", "input_invalid_rejected"))(
    edit_error(_retryable))
mutant("too_many_input_diagnostics", "at most 8 input diagnostics", ("input_invalid_rejected",))(
    edit_error(_many_diagnostics))


@mutant("success_as_text_only", "every success carries structuredContent (the text is its fallback)",
        ("output_schema", "result_ordering"))
def _success_as_text_only(request: dict, response: dict, state: dict) -> dict:
    if success(response) is None or not tool_of(request):
        return response
    out = copy.deepcopy(response)
    del out["result"]["structuredContent"]
    return out


@mutant("tool_errors_as_jsonrpc", "tool failures are isError results", ("input_invalid_rejected",))
def _errors_as_jsonrpc(request: dict, response: dict, state: dict) -> dict:
    env = envelope(response)
    if env is None:
        return response
    return {"jsonrpc": "2.0", "id": response.get("id"), "error": {"code": -32602, "message": env.get("message", "")}}


@mutant("unknown_tool_as_result", "unknown tool is JSON-RPC -32602", ("unknown_tool",))
def _unknown_as_result(request: dict, response: dict, state: dict) -> dict:
    if request.get("method") == "tools/call" and "error" in response:
        env = {"code": "invalid_request", "message": "unknown tool", "retryable": False, "diagnostics": []}
        return {"jsonrpc": "2.0", "id": response.get("id"), "result": {
            "content": [{"type": "text", "text": "unknown tool"}], "structuredContent": env, "isError": True}}
    return response


# ---- text, listing, state ---------------------------------------------------------------------


@mutant("text_fallback_drift", "text content is the structured content as JSON", ("text_fallback",))
def _text_drift(request: dict, response: dict, state: dict) -> dict:
    if success(response) is None:
        return response
    out = copy.deepcopy(response)
    for item in out["result"].get("content", []):
        if item.get("type") == "text":
            item["text"] = json.dumps({"stale": True})
    return out


def _listing(edit: Callable[[list], None]) -> Mutation:
    def mutate(request: dict, response: dict, state: dict) -> dict:
        if request.get("method") != "tools/list" or result(response) is None:
            return response
        out = copy.deepcopy(response)
        edit(out["result"].get("tools", []))
        return out

    return mutate


def _drop_neighbors(tools: list) -> None:
    tools[:] = [t for t in tools if t.get("name") != "get_neighbors"]


def _loosen_limit(tools: list) -> None:
    for t in tools:
        limit = (t.get("inputSchema") or {}).get("properties", {}).get("limit")
        if isinstance(limit, dict) and "maximum" in limit:
            limit["maximum"] = limit["maximum"] + 1


mutant("list_drops_get_neighbors", "every spec tool is advertised", ("tools_list",), tools=("get_neighbors",))(_listing(_drop_neighbors))
mutant("list_loosens_limit", "advertised schemas equal the contract", ("tools_list",))(_listing(_loosen_limit))


@mutant("stale_cached_answer", "each call reads its own arguments", ("differential_search",
                                                                     "differential_neighbors"))
def _stale(request: dict, response: dict, state: dict) -> dict:
    tool = tool_of(request)
    if not tool or success(response) is None:
        return response
    key = (tool, args_of(request).get("bundle_path"))
    cached = state.setdefault("cache", {}).setdefault(key, response)
    return {**copy.deepcopy(cached), "id": response.get("id")}


@mutant("alternating_key_order", "the same call gives the same bytes", ("determinism",))
def _alternate(request: dict, response: dict, state: dict) -> dict:
    out = success(response)
    if out is None:
        return response
    state["n"] = state.get("n", 0) + 1
    if state["n"] % 2:
        return response
    copied = copy.deepcopy(response)
    copied["result"]["structuredContent"] = dict(reversed(list(out.items())))
    return copied


# ---- second batch: echoes, cards, envelopes, content, listing details ---------------------------


def _set(key: str, value: Callable[[Any], Any]) -> Callable[[dict], bool]:
    def edit(out: dict) -> bool:
        if key not in out:
            return False
        new = value(out[key])
        changed = new != out[key]
        out[key] = new
        return changed

    return edit


def _first_card_loses(field: str) -> Callable[[dict], bool]:
    def edit(out: dict) -> bool:
        for hit in out.get("hits", []):
            card = hit.get("concept")
            if isinstance(card, dict) and field in card:
                del card[field]
                return True
        return False

    return edit


def _swap_first_tie(out: dict) -> bool:
    hits = out.get("hits", [])
    for i in range(len(hits) - 1):
        if hits[i].get("match") == hits[i + 1].get("match"):
            hits[i], hits[i + 1] = hits[i + 1], hits[i]
            return True
    return False


def _relation_type_null(out: dict) -> bool:
    for edge in out.get("edges", []):
        if edge.get("kind") == "relation" and edge.get("relation_type") is not None:
            edge["relation_type"] = None
            return True
    return False


def _concept_card_other(out: dict) -> bool:
    card = out.get("concept")
    if isinstance(card, dict) and isinstance(card.get("id"), str):
        card["id"] = card["id"] + "-other"
        return True
    return False


mutant("search_query_echo_changed", "the response echoes the query", ("differential_search",))(
    edit_success("search_concepts", _set("query", lambda q: f"{q} " if isinstance(q, str) else q)))
mutant("search_card_loses_title", "cards carry every required field", ("output_schema",))(
    edit_success("search_concepts", _first_card_loses("title")))
mutant("search_ties_not_by_id", "equal priority hits are ordered by id", ("result_ordering",))(
    edit_success("search_concepts", _swap_first_tie))
mutant("neighbors_direction_echo_wrong", "the response echoes the direction", ("differential_neighbors",))(
    edit_success("get_neighbors", _set("direction", lambda d: {"in": "out", "out": "in", "both": "in"}.get(d, d))))
mutant("neighbors_kinds_echo_unsorted", "the kinds echo is navigation, relation, source",
       ("differential_neighbors",))(edit_success("get_neighbors", _set("kinds", lambda k: list(reversed(k)))))
mutant("neighbors_relation_type_null", "relation edges carry their declared type", ("differential_neighbors",))(
    edit_success("get_neighbors", _relation_type_null))
mutant("neighbors_drop_sources", "sources list every valid provenance entry", ("differential_neighbors",))(
    edit_success("get_neighbors", _drop_last("sources")))
mutant("neighbors_wrong_concept_card", "the concept card is the selected concept", ("differential_neighbors",))(
    edit_success("get_neighbors", _concept_card_other))
mutant("neighbors_total_minus_one", "total counts the selected edges", ("differential_neighbors", "truncation"))(
    edit_success("get_neighbors", _set("total", lambda t: t - 1 if isinstance(t, int) and t > 0 else t)))


def _empty_message(env: dict, request: dict) -> bool:
    env["message"] = ""
    return True


def _upper_code(env: dict, request: dict) -> bool:
    env["code"] = str(env.get("code", "")).upper()
    return True


mutant("envelope_empty_message", "the envelope message is non-empty", ("output_schema", "input_invalid_rejected"))(
    edit_error(_empty_message))
mutant("envelope_code_uppercase", "codes match ^[a-z0-9_]+$", ("output_schema", "input_invalid_rejected"))(
    edit_error(_upper_code))


@mutant("success_without_text", "a success carries its text-compatible content", ("text_fallback",))
def _no_text(request: dict, response: dict, state: dict) -> dict:
    if success(response) is None:
        return response
    out = copy.deepcopy(response)
    out["result"]["content"] = []
    return out


@mutant("error_without_text", "an isError result carries text content", ("output_schema",))
def _error_no_text(request: dict, response: dict, state: dict) -> dict:
    if envelope(response) is None:
        return response
    out = copy.deepcopy(response)
    out["result"]["content"] = []
    return out


@mutant("success_flagged_as_error", "isError results carry the envelope", ("output_schema",))
def _success_as_error(request: dict, response: dict, state: dict) -> dict:
    if success(response) is None:
        return response
    out = copy.deepcopy(response)
    out["result"]["isError"] = True
    return out


@mutant("unknown_tool_wrong_rpc_code", "unknown tool is JSON-RPC -32602", ("unknown_tool",))
def _unknown_code(request: dict, response: dict, state: dict) -> dict:
    if request.get("method") == "tools/call" and isinstance(response.get("error"), dict):
        out = copy.deepcopy(response)
        out["error"]["code"] = -32601
        return out
    return response


def _drop_output_schema(tools: list) -> None:
    for t in tools:
        t.pop("outputSchema", None)


def _flip_read_only(tools: list) -> None:
    for t in tools:
        hints = t.setdefault("annotations", {})
        hints["readOnlyHint"] = not hints.get("readOnlyHint", True)


mutant("list_drops_output_schemas", "every tool advertises its output schema", ("tools_list",))(
    _listing(_drop_output_schema))
mutant("list_flips_read_only_hint", "annotations follow the tool table", ("tools_list",))(
    _listing(_flip_read_only))


# ---- help and document pools ------------------------------------------------------------------
def _swap_first_two(key: str) -> Callable[[dict], bool]:
    """Swap the first two results when they differ in their ordering key (score, confidence)."""
    def edit(out: dict) -> bool:
        items = out.get(key)
        if isinstance(items, list) and len(items) > 1 and items[0] != items[1]:
            items[0], items[1] = items[1], items[0]
            return True
        return False

    return edit


def _results_over_limit(out: dict) -> bool:
    items = out.get("results")
    if isinstance(items, list) and items:
        out["results"] = items + items[:1] * 60
        return True
    return False


mutant("doc_search_reverse_results", "doc_search results ordered by score", ("result_ordering",))(
    edit_success("doc_search", _reverse("results")))
mutant("help_search_swap_results", "help_search results ordered by score", ("result_ordering",))(
    edit_success("help_search", _swap_first_two("results")))
mutant("doc_links_reverse", "doc_links most reliable first", ("result_ordering",))(
    edit_success("doc_links", _reverse("results")))
mutant("doc_search_over_limit", "at most limit results", ("output_schema", "truncation"))(
    edit_success("doc_search", _results_over_limit))


# ---- cancellation: edits of the client's messages ---------------------------------------------
# A good server never answers a cancelled request, so no edit of a response can break the rule.
# These mutants act on what the client sends (the proxy's client hook). They live outside
# MUTANTS, whose members must each change some response on their own.

ClientEdit = Callable[[dict, dict, dict], tuple[list[dict], list[dict]]]
"""(client message, requests still awaiting an answer by id, state) -> (to the server, to the client)."""


@dataclass(frozen=True)
class ClientMutant:
    name: str
    rule: str
    edit: ClientEdit
    killed_by: tuple[str, ...] = ()


CLIENT_MUTANTS: dict[str, ClientMutant] = {}


def client_mutant(name: str, rule: str, killed_by: tuple[str, ...] = ()) -> Callable[[ClientEdit], ClientEdit]:
    def register(func: ClientEdit) -> ClientEdit:
        CLIENT_MUTANTS[name] = ClientMutant(name, rule, func, killed_by)
        return func

    return register


def _is_cancel(message: dict) -> bool:
    return message.get("method") == "notifications/cancelled"


@client_mutant("cancel_ignored", "a cancelled call is never answered with a success", ("cancellation",))
def _ignore_cancel(message: dict, pending: dict, state: dict) -> tuple[list[dict], list[dict]]:
    """The cancel never reaches the server, which runs the call to the end and answers it."""
    return ([], []) if _is_cancel(message) else ([message], [])


@client_mutant("cancel_answered_wrong_code", "a cancelled call answers nothing or operation_cancelled",
               ("cancellation",))
def _wrong_cancel_code(message: dict, pending: dict, state: dict) -> tuple[list[dict], list[dict]]:
    """The cancel is honoured, but the call is also answered with operation_rejected."""
    rid = (message.get("params") or {}).get("requestId") if _is_cancel(message) else None
    if rid is None or pending.pop(rid, None) is None:
        return [message], []
    env = {"code": "operation_rejected", "message": "tool operation was rejected", "retryable": False,
           "diagnostics": []}
    answer = {"jsonrpc": "2.0", "id": rid, "result": {
        "content": [{"type": "text", "text": json.dumps(env)}], "structuredContent": env, "isError": True}}
    return [message], [answer]


@client_mutant("cancel_breaks_session", "the session stays usable after a cancel", ("cancellation",))
def _drop_after_cancel(message: dict, pending: dict, state: dict) -> tuple[list[dict], list[dict]]:
    """After a cancel the next tool call is lost, as if the server's reader had wedged."""
    if _is_cancel(message):
        state["drop_next"] = True
    elif state.get("drop_next") and message.get("method") == "tools/call":
        state["drop_next"] = False
        return [], []
    return [message], []


# the per-tool catalogue for the other tools registers itself here (imported last: it uses the helpers above)
from knowspec.conformance.mutants import catalogue_tools  # noqa: E402,F401
from knowspec.conformance.mutants import catalogue_defaults  # noqa: E402,F401

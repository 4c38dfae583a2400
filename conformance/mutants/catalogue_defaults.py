"""Mutants of input defaults and of limits reached through ``$ref``.

A server's default is invisible in its answers, so the default mutants edit what the client
sends (the proxy's client hook): a call leaving the argument out reaches the server with another
value, as if that were the server's default. The limit mutants answer a past-limit value as an
unknown one (``not_found``), as a server that never checks the shared ``$defs`` bound would.
"""

from __future__ import annotations

from typing import Any

from knowspec.conformance.mutants.catalogue import ClientEdit, client_mutant, mutant
from knowspec.conformance.mutants.catalogue_tools import recode_on

D = ("oracle_pool_defaults",)
B = ("boundary_limits",)


def default_replaced(tool: str, argument: str, value: Any) -> ClientEdit:
    """A ``tools/call`` of ``tool`` without ``argument`` is sent with ``value`` for it."""
    def edit(message: dict, pending: dict, state: dict) -> tuple[list[dict], list[dict]]:
        params = message.get("params") or {}
        if message.get("method") != "tools/call" or params.get("name") != tool:
            return [message], []
        arguments = params.get("arguments") or {}
        if argument in arguments:
            return [message], []
        return [{**message, "params": {**params, "arguments": {**arguments, argument: value}}}], []

    return edit


client_mutant("doc_search_default_limit_ignored", "doc_search without limit returns at most 10", D)(
    default_replaced("doc_search", "limit", 50))
client_mutant("doc_search_default_mode_hybrid", "doc_search without mode is fts", D)(
    default_replaced("doc_search", "mode", "hybrid"))
client_mutant("help_search_default_limit_5", "help_search without limit returns at most 10", D)(
    default_replaced("help_search", "limit", 5))
client_mutant("doc_entities_default_limit_ignored", "doc_entities without limit returns at most 20", D)(
    default_replaced("doc_entities", "limit", 200))
client_mutant("doc_entities_default_limit_5", "doc_entities without limit returns at most 20", D)(
    default_replaced("doc_entities", "limit", 5))

mutant("doc_get_long_slug_looked_up", "a slug over Slug's maxLength (through $ref) is resource_limit", B,
       kind="limits")(recode_on("doc_get", "resource_limit", "not_found"))
mutant("help_get_topic_long_form_class_looked_up", "a form_class over its maxLength is resource_limit", B,
       kind="limits")(recode_on("help_get_topic", "resource_limit", "not_found"))

"""Server-side mutants: behaviour a response edit cannot fake (compare-and-swap, ACL before ranking,
query folding, what a refused write leaves on disk). Declared here as data; a mutant host (a
launcher that runs a real server in-process, e.g. ``tests/conformance/mutant_host.py`` for
knowspec) implements each name by patching one function of that server. The suite never imports
the server: it only names the mutant the host must switch to (see ``killrate.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerMutant:
    name: str
    rule: str
    tools: tuple[str, ...]
    killed_by: tuple[str, ...]
    kind: str


SERVER_MUTANTS: dict[str, ServerMutant] = {}


def server_mutant(name: str, rule: str, tools: tuple[str, ...], killed_by: tuple[str, ...], kind: str) -> None:
    if name in SERVER_MUTANTS:
        raise ValueError(f"server mutant {name!r} declared twice")
    SERVER_MUTANTS[name] = ServerMutant(name, rule, tools, killed_by, kind)


P, T, V, W = ("oracle_concept_patch",), ("oracle_temporal_upgrade",), ("oracle_v02_migration",), ("oracle_write_concept",)
server_mutant("write_concept_drops_body", "write_concept writes the body it was sent", ("write_concept",), W, "write")
server_mutant("write_concept_refusal_leaves_file", "a refused write changes nothing", ("write_concept",), W, "write")
server_mutant("apply_patch_no_compare_and_swap", "apply refuses a stale expected_revision (CAS)",
              ("apply_concept_patch",), P, "cas")
server_mutant("apply_patch_ignores_plan_digest", "apply refuses a plan digest that is not the live plan's",
              ("apply_concept_patch",), P, "binding")
server_mutant("preview_patch_writes", "a preview writes nothing", ("preview_concept_patch",), P, "write")
server_mutant("apply_temporal_no_compare_and_swap", "the temporal apply refuses a stale base_revision",
              ("apply_temporal_upgrade",), T, "cas")
server_mutant("apply_v02_ignores_plan_digest", "the migration apply refuses a foreign plan digest",
              ("apply_v02_migration",), V, "binding")
server_mutant("list_concepts_as_of_day_early", "staleness is judged at the as_of day itself (inclusive)",
              ("list_concepts",), ("oracle_list_concepts",), "temporal")
server_mutant("search_sections_limit_ignored", "at most limit hits", ("search_sections",),
              ("oracle_search_sections", "truncation"), "limits")
server_mutant("query_fold_keeps_dotless_i", "queries fold ı/İ like the index (Turkish folding)",
              ("doc_search", "help_search"), ("oracle_doc_search", "oracle_help_search"), "folding")
server_mutant("doc_search_acl_after_ranking", "forbidden topics are filtered before ranking and the limit",
              ("doc_search",), ("oracle_doc_search",), "acl")
server_mutant("doc_search_ignores_acl", "forbidden topics are never ranked", ("doc_search",),
              ("oracle_doc_search", "docpool_import_acl"), "acl")
server_mutant("doc_get_ignores_acl", "a forbidden topic answers not_found", ("doc_get",),
              ("oracle_doc_get", "docpool_import_acl"), "acl")
server_mutant("doc_entity_counts_hidden_topics", "doc_entity.topics counts only visible topics", ("doc_entity",),
              ("oracle_doc_entity",), "acl")
server_mutant("doc_links_ignores_acl", "doc_links lists only visible topics", ("doc_links",),
              ("oracle_doc_links",), "acl")
server_mutant("doc_stats_counts_restricted", "doc_stats counts only the caller's topics", ("doc_stats",),
              ("oracle_doc_stats",), "acl")
server_mutant("doc_collections_counts_restricted", "doc_collections counts only the caller's topics",
              ("doc_collections",), ("oracle_doc_collections",), "acl")
server_mutant("help_stats_counts_document_pool", "help_stats counts the help pool only", ("help_stats",),
              ("oracle_help_stats",), "results")
server_mutant("help_search_ignores_module", "module keeps only topics linked to that module", ("help_search",),
              ("oracle_help_search",), "results")
server_mutant("doc_entities_limit_off_by_one", "at most limit entities, from the first", ("doc_entities",),
              ("oracle_doc_entities",), "limits")

# REST surface (kind "rest"): judged with a pool imported through IMPORTDOC, an admin and a reader.
S = ("rest_sessions",)
server_mutant("rest_login_accepts_wrong_password", "Login refuses a wrong password (401)", (), S, "rest")
server_mutant("rest_doc_without_session", "Help*/Doc* need a live session (401 without one)", (), S, "rest")
server_mutant("rest_no_session_answers_403", "no session is 401 unauthenticated, not 403", (), S, "rest")
server_mutant("rest_logout_keeps_session", "a logged-out token is refused (401)", (), S, "rest")
server_mutant("rest_tool_errors_answer_400", "a tool error's HTTP status is its code's (not_found: 404)", (), S, "rest")
server_mutant("rest_envelope_code_generic", "a REST error envelope carries the tool's code", (), S, "rest")
server_mutant("rest_body_cap_off", "REST bodies over 1 MiB are refused with 413", (), S, "rest")
server_mutant("rest_doc_calls_ignore_acl", "REST Doc* calls see only what the session's principals may",
              (), ("docpool_import_acl",), "rest")
server_mutant("importdoc_without_sysadmin", "IMPORTDOC is SYSADMIN only", (), ("docpool_import_non_admin",), "rest")
server_mutant("importdoc_refusal_leaks_path", "an IMPORTDOC refusal names no absolute path", (),
              ("docpool_import_refusals", "rest_importdoc"), "rest")

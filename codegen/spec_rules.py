"""How each kind of contract change lands on clients and on implementations: the rule table.

The diff engine (``spec_diff``) only observes changes and names their kind; this table alone
decides the class. Each rule carries an example, and spec/README.md#revisions lists them all.
Inputs are what a client sends and an implementation must accept; outputs are what an
implementation sends and a client reads. So narrowing an input breaks clients and widening one
breaks implementations (a server built for OLD refuses what NEW allows, and fails NEW's
conformance), while narrowing an output breaks implementations that still send the old values.
"""

from __future__ import annotations

from dataclasses import dataclass

BREAKING_CLIENTS = "breaking"                  # a client written for OLD may fail against NEW
BREAKING_IMPLEMENTATIONS = "breaking-implementations"  # a server built for OLD may fail NEW's conformance
COMPATIBLE = "compatible"
CLASSES = (BREAKING_CLIENTS, BREAKING_IMPLEMENTATIONS, COMPATIBLE)


@dataclass(frozen=True)
class Rule:
    kind: str        # what changed, e.g. "input.bound_narrowed"
    cls: str         # one of CLASSES
    inverse: str     # the kind the same edit shows when OLD and NEW are swapped
    example: str


def _pair(kind: str, cls: str, inverse: str, inverse_cls: str, example: str, inverse_example: str) -> tuple[Rule, Rule]:
    return Rule(kind, cls, inverse, example), Rule(inverse, inverse_cls, kind, inverse_example)


_RULES: tuple[Rule, ...] = (
    # --- tools -----------------------------------------------------------------------------
    *_pair("tool.removed", BREAKING_CLIENTS, "tool.added", BREAKING_IMPLEMENTATIONS,
           "doc_links is no longer in the tool table", "a new tool search_notes must now be served"),
    *_pair("tool.read_only_set", COMPATIBLE, "tool.read_only_cleared", BREAKING_CLIENTS,
           "write_concept is now declared read-only", "list_concepts may now change the bundle"),
    *_pair("tool.idempotent_set", COMPATIBLE, "tool.idempotent_cleared", BREAKING_CLIENTS,
           "a repeated apply now promises the same result", "a repeated call may now differ"),
    Rule("tool.ordering_changed", BREAKING_CLIENTS, "tool.ordering_changed", "hits: id ascending instead of priority"),
    Rule("tool.text_changed", BREAKING_CLIENTS, "tool.text_changed", "text_fallback json -> custom, or encoder plain -> go"),
    *_pair("tool.error_added", COMPATIBLE, "tool.error_removed", COMPATIBLE,
           "get_neighbors may now answer resource_limit", "doc_get no longer answers storage_error"),
    Rule("tool.prose_changed", COMPATIBLE, "tool.prose_changed", "a reworded description or title"),
    # --- inputs (the client sends) ----------------------------------------------------------
    *_pair("input.required_added", BREAKING_CLIENTS, "input.required_removed", BREAKING_IMPLEMENTATIONS,
           "search_concepts now requires as_of", "limit is no longer required"),
    *_pair("input.property_removed", BREAKING_CLIENTS, "input.property_added", BREAKING_IMPLEMENTATIONS,
           "the closed input schema no longer has tags", "an optional input property kinds is added"),
    *_pair("input.type_narrowed", BREAKING_CLIENTS, "input.type_widened", BREAKING_IMPLEMENTATIONS,
           "limit: [integer, null] -> integer", "limit: integer -> [integer, null]"),
    *_pair("input.enum_narrowed", BREAKING_CLIENTS, "input.enum_widened", BREAKING_IMPLEMENTATIONS,
           "direction loses both", "direction gains sideways"),
    *_pair("input.bound_narrowed", BREAKING_CLIENTS, "input.bound_widened", BREAKING_IMPLEMENTATIONS,
           "limit maximum 100 -> 50", "limit maximum 100 -> 200"),
    *_pair("input.closed", BREAKING_CLIENTS, "input.opened", BREAKING_IMPLEMENTATIONS,
           "additionalProperties true -> false", "additionalProperties false -> true"),
    Rule("input.constraint_changed", BREAKING_CLIENTS, "input.constraint_changed",
         "a pattern, format or const on an input changed (its direction cannot be told)"),
    Rule("input.default_changed", BREAKING_CLIENTS, "input.default_changed",
         "limit default 20 -> 10: a client that omits it gets other results"),
    Rule("input.prose_changed", COMPATIBLE, "input.prose_changed", "a reworded property description"),
    # --- outputs (the implementation sends) -------------------------------------------------
    *_pair("output.required_removed", BREAKING_CLIENTS, "output.required_added", BREAKING_IMPLEMENTATIONS,
           "total may now be left out", "every hit must now carry score"),
    *_pair("output.property_removed", BREAKING_CLIENTS, "output.property_added", COMPATIBLE,
           "an open hit object no longer declares snippet", "an open hit object declares breadcrumb"),
    *_pair("output.closed_property_removed", BREAKING_IMPLEMENTATIONS, "output.closed_property_added",
           BREAKING_CLIENTS, "a closed hit object loses snippet (a server built for OLD still sends it)",
           "a closed hit object gains breadcrumb (a client checking OLD's schema refuses it)"),
    *_pair("output.type_widened", BREAKING_CLIENTS, "output.type_narrowed", BREAKING_IMPLEMENTATIONS,
           "stale: boolean -> [boolean, null]", "stale: [boolean, null] -> boolean"),
    *_pair("output.enum_widened", BREAKING_CLIENTS, "output.enum_narrowed", BREAKING_IMPLEMENTATIONS,
           "status gains archived", "status loses draft"),
    *_pair("output.bound_widened", BREAKING_CLIENTS, "output.bound_narrowed", BREAKING_IMPLEMENTATIONS,
           "hits maxItems 100 -> 200", "score maximum none -> 1"),
    *_pair("output.opened", BREAKING_CLIENTS, "output.closed", BREAKING_IMPLEMENTATIONS,
           "additionalProperties false -> true", "additionalProperties true -> false"),
    Rule("output.constraint_changed", BREAKING_CLIENTS, "output.constraint_changed",
         "a pattern, format or const on an output changed (its direction cannot be told)"),
    Rule("output.default_changed", COMPATIBLE, "output.default_changed", "an annotation on an output property"),
    Rule("output.prose_changed", COMPATIBLE, "output.prose_changed", "a reworded property description"),
    # --- error codes -------------------------------------------------------------------------
    *_pair("error.removed", BREAKING_CLIENTS, "error.added", COMPATIBLE,
           "code storage_error no longer exists", "a new code quota_exceeded"),
    Rule("error.renamed", BREAKING_CLIENTS, "error.renamed", "not_found -> concept_not_found (same meaning)"),
    Rule("error.retryable_changed", BREAKING_CLIENTS, "error.retryable_changed", "storage_error retryable true -> false"),
    Rule("error.prose_changed", COMPATIBLE, "error.prose_changed", "a reworded meaning"),
    # --- REST endpoints ---------------------------------------------------------------------
    *_pair("endpoint.removed", BREAKING_CLIENTS, "endpoint.added", BREAKING_IMPLEMENTATIONS,
           "GET /ClientREST/HelpStats is gone", "a new POST /ClientREST/DocExport must be served"),
    *_pair("endpoint.auth_tightened", BREAKING_CLIENTS, "endpoint.auth_loosened", BREAKING_IMPLEMENTATIONS,
           "auth session -> sysadmin", "auth session -> none"),
    *_pair("endpoint.status_added", COMPATIBLE, "endpoint.status_removed", COMPATIBLE,
           "an endpoint may now answer 413", "an endpoint no longer answers 415"),
    Rule("endpoint.prose_changed", COMPATIBLE, "endpoint.prose_changed", "a reworded summary"),
    # --- pool DDL ----------------------------------------------------------------------------
    *_pair("ddl.table_removed", BREAKING_CLIENTS, "ddl.table_added", COMPATIBLE,
           "doc$recipe is dropped", "a new table doc$note"),
    *_pair("ddl.column_removed", BREAKING_CLIENTS, "ddl.column_added", COMPATIBLE,
           "doc$topic loses breadcrumb", "doc$topic gains a nullable column"),
    *_pair("ddl.column_required", BREAKING_CLIENTS, "ddl.column_optional", COMPATIBLE,
           "a column becomes NOT NULL without a default: older source pools no longer import",
           "a NOT NULL column becomes nullable"),
    Rule("ddl.column_type_changed", BREAKING_CLIENTS, "ddl.column_type_changed", "doc$topic.weight INTEGER -> TEXT"),
)

RULES: dict[str, Rule] = {rule.kind: rule for rule in _RULES}


def classify(kind: str) -> str:
    """The class of a change kind; an unknown kind is breaking, so a gap in the table fails safe."""
    rule = RULES.get(kind)
    return rule.cls if rule else BREAKING_CLIENTS

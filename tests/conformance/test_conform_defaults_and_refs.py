"""Input defaults on the suite's pools, and input bounds reached through ``$ref``."""

from __future__ import annotations


import pytest

from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import load_contract
from knowspec.conformance.fixtures.pools import help_fixture
from knowspec.conformance.generate import acceptable_error_codes, boundary_cases, input_limits, resolved
from knowspec.conformance.mutants.killrate import kill_rate
from knowspec.conformance.oracles.pool_defaults import default_probes, input_defaults
from knowspec.conformance.pool_fixture import generate
from pool_target import served_fixture

CONTRACT = load_contract()


def _cases(tool: str) -> dict[str, set[str]]:
    t = CONTRACT.tool(tool)
    return {c.label: acceptable_error_codes(t.input_schema, c.arguments) for c in boundary_cases(t, {})}


# ---- limits through $ref ---------------------------------------------------------------------

def test_the_contract_limits_leave_out_bounds_the_schema_reaches_through_ref():
    """The evidence of the miss: doc_get restates no limit, so boundary_limits was never planned on it."""
    doc_get = CONTRACT.tool("doc_get")
    assert doc_get.limits == {} and doc_get.input_properties["slug"] == {"$ref": "#/$defs/Slug"}
    assert input_limits(doc_get)["slug"] == {"maxLength": 512}


def test_a_local_ref_is_resolved_and_the_property_own_keywords_win():
    doc = {"$defs": {"Slug": {"type": "string", "maxLength": 512, "description": "a topic slug"}}}
    assert resolved(doc, {"$ref": "#/$defs/Slug", "description": "own"}) == {
        "type": "string", "maxLength": 512, "description": "own"}
    assert resolved(doc, {"$ref": "other.json#/$defs/Slug"}) == {"$ref": "other.json#/$defs/Slug"}


@pytest.mark.parametrize("tool, name, size", [("doc_get", "slug", 512), ("doc_get", "collection", 64),
                                              ("doc_entity", "key", 256), ("doc_links", "kind", 64),
                                              ("doc_stats", "database", 128), ("help_get_topic", "form_class", 256)])
def test_every_ref_or_unrestated_max_length_gets_an_accepted_and_a_resource_limit_case(tool, name, size):
    cases = _cases(tool)
    assert cases[f"len({name})={size}"] == set()
    assert cases[f"len({name})={size + 1}"] == {"resource_limit"}


def test_a_collection_breaking_the_shared_pattern_is_a_schema_validation_case():
    assert _cases("doc_search")["collection!~pattern"] == {"schema_validation"}


def test_a_bound_of_one_anyof_alternative_is_judged_with_that_alternative_complete():
    """doc_get needs slug, or kind and key: a case of key alone would be refused for the missing kind."""
    args = {c.label: c.arguments for c in boundary_cases(CONTRACT.tool("doc_get"), {})}
    assert set(args["len(key)=256"]) == {"kind", "key"} and set(args["len(collection)=64"]) == {"slug", "collection"}


# ---- defaults ------------------------------------------------------------------------------------

def test_the_defaults_the_contract_fixes_are_read_from_the_schemas():
    assert input_defaults(CONTRACT.tool("doc_search")) == {"mode": "fts", "limit": 10}
    assert input_defaults(CONTRACT.tool("help_search")) == {"limit": 10}
    assert input_defaults(CONTRACT.tool("doc_entities")) == {"limit": 20}


@pytest.mark.parametrize("seed", [0, 1, 5, 42])
def test_default_limit_probes_match_more_rows_than_the_default_limit(seed):
    """Otherwise a server returning every match would answer as one applying the default."""
    docs, helps = generate(seed, "fixture"), help_fixture(seed)
    probes = [p for name in ("doc_search", "help_search", "doc_entities")
              for p in default_probes(CONTRACT.tool(name), docs, helps)]
    assert {(p.tool, p.argument) for p in probes} == {("doc_search", "limit"), ("doc_search", "mode"),
                                                      ("help_search", "limit"), ("doc_entities", "limit")}
    assert all(p.discriminates for p in probes)
    assert {p.tool: p.expected_count for p in probes} == {"doc_search": 10, "help_search": 10, "doc_entities": 20}


def test_a_probe_isolates_one_default_and_names_the_others_in_both_calls():
    probe = next(p for p in default_probes(CONTRACT.tool("doc_search"), generate(0, "fixture"), None)
                 if p.argument == "mode")
    assert "mode" not in probe.omitted and probe.named["mode"] == "fts"
    assert probe.omitted["limit"] == probe.named["limit"] == 10


# ---- the mutants, through the proxy in front of our server ---------------------------------------

DEFAULT_MUTANTS = {"doc_search_default_limit_ignored": "oracle_pool_defaults[doc_search]",
                   "doc_search_default_mode_hybrid": "oracle_pool_defaults[doc_search]",
                   "help_search_default_limit_5": "oracle_pool_defaults[help_search]",
                   "doc_entities_default_limit_5": "oracle_pool_defaults[doc_entities]",
                   "doc_entities_default_limit_ignored": "oracle_pool_defaults[doc_entities]",
                   "doc_get_long_slug_looked_up": "boundary_limits[doc_get]",
                   "help_get_topic_long_form_class_looked_up": "boundary_limits[help_get_topic]"}


@pytest.mark.slow
def test_default_and_ref_limit_mutants_are_killed_while_the_real_server_passes(tmp_path):
    """A server whose default is another value, or that looks up a slug past Slug's maxLength,
    answers schema-valid results; only the defaults check and the $ref-resolving bounds see it."""
    pool, server = served_fixture(tmp_path)
    base = RunConfig(target="", family="docpool", tools=("doc_search", "help_search", "doc_entities", "doc_get",
                                                        "help_get_topic"),
                     checks=("oracle_pool_defaults", "boundary_limits"), pool_fixture=pool.directory, max_examples=2)
    results = list(kill_rate(base, server, list(DEFAULT_MUTANTS)))
    assert results[0].name == "identity" and results[0].killed_by == () and not results[0].unreachable
    assert {r.name: r.killed_by for r in results[1:]} == {name: (case,) for name, case in DEFAULT_MUTANTS.items()}

"""Every rule of the contract-diff table, one case each, and the engine's symmetry."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.codegen.contract_view import ContractView
from knowspec.codegen.spec_diff import diff, schema_changes
from knowspec.codegen.spec_rules import BREAKING_CLIENTS, BREAKING_IMPLEMENTATIONS, COMPATIBLE, RULES

DDL = "create table t (id integer primary key, a text, b text not null default '');"


def tool(**over) -> dict:
    base = {"name": "t", "title": "T", "description": "d", "read_only": True, "idempotent": True,
            "errors": ["invalid_request"], "ordering": {"hits": "id"}, "text_fallback": "json", "wrap": "",
            "input_schema": {"type": "object", "additionalProperties": False, "required": ["q"], "properties": {
                "q": {"type": "string", "maxLength": 10, "description": "query"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                "mode": {"enum": ["a", "b"]}}},
            "success_schema": {"type": "object", "additionalProperties": False, "required": ["hits"], "properties": {
                "hits": {"type": "array", "maxItems": 100, "items": {"type": "string", "pattern": "^x"}},
                "status": {"enum": ["ok", "empty"]}, "total": {"type": "integer", "minimum": 0}}}}
    base.update(over)
    return base


def view(tools=None, errors=None, endpoints=None, ddl=DDL) -> ContractView:
    return ContractView("v", {}, {t["name"]: t for t in (tools if tools is not None else [tool()])},
                        errors if errors is not None else {"x_err": {"meaning": "x", "retryable": False}},
                        endpoints if endpoints is not None else {"GET /a": {"auth": "session", "errors": [400],
                                                                            "summary": "s", "request": None,
                                                                            "response": None}},
                        ddl)


def edit(path: str, value=None, delete=False):
    """A view whose default tool has ``value`` at the dotted ``path`` (or lacks it)."""
    t = tool()
    node = t
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    if delete:
        del node[last]
    else:
        node[last] = value
    return view([t])


def ep(**over):
    row = {"auth": "session", "errors": [400], "summary": "s", "request": None, "response": None}
    row.update(over)
    return view(endpoints={"GET /a": row})


def open_output(name: str | None = None, value=None):
    """A view whose default tool's output object is open, without ``name`` (or with ``value`` there)."""
    t = tool()
    t["success_schema"]["additionalProperties"] = True
    if name is not None and value is None:
        del t["success_schema"]["properties"][name]
    elif name is not None:
        t["success_schema"]["properties"][name] = value
    return view([t])


IN = "input_schema.properties"
OUT = "success_schema.properties"
CASES = {
    "tool.removed": (view(), view([])),
    "tool.added": (view([]), view()),
    "tool.read_only_set": (view([tool(read_only=False)]), view()),
    "tool.read_only_cleared": (view(), view([tool(read_only=False)])),
    "tool.idempotent_set": (view([tool(idempotent=False)]), view()),
    "tool.idempotent_cleared": (view(), view([tool(idempotent=False)])),
    "tool.ordering_changed": (view(), view([tool(ordering={"hits": "score descending"})])),
    "tool.text_changed": (view(), view([tool(text_fallback="custom")])),
    "tool.error_added": (view(), view([tool(errors=["invalid_request", "resource_limit"])])),
    "tool.error_removed": (view(), view([tool(errors=[])])),
    "tool.prose_changed": (view(), view([tool(description="other words")])),
    "input.required_added": (view(), edit("input_schema.required", ["q", "limit"])),
    "input.required_removed": (view(), edit("input_schema.required", [])),
    "input.property_added": (view(), edit(f"{IN}.extra", {"type": "string"})),
    "input.property_removed": (view(), edit(f"{IN}.mode", delete=True)),
    "input.type_narrowed": (edit(f"{IN}.limit.type", ["integer", "null"]), view()),
    "input.type_widened": (view(), edit(f"{IN}.limit.type", ["integer", "null"])),
    "input.enum_narrowed": (view(), edit(f"{IN}.mode.enum", ["a"])),
    "input.enum_widened": (view(), edit(f"{IN}.mode.enum", ["a", "b", "c"])),
    "input.bound_narrowed": (view(), edit(f"{IN}.limit.maximum", 50)),
    "input.bound_widened": (view(), edit(f"{IN}.limit.maximum", 200)),
    "input.closed": (edit("input_schema.additionalProperties", True), view()),
    "input.opened": (view(), edit("input_schema.additionalProperties", True)),
    "input.constraint_changed": (view(), edit(f"{IN}.q.pattern", "^[a-z]+$")),
    "input.default_changed": (view(), edit(f"{IN}.limit.default", 10)),
    "input.prose_changed": (view(), edit(f"{IN}.q.description", "the words to find")),
    "output.required_removed": (view(), edit("success_schema.required", [])),
    "output.required_added": (view(), edit("success_schema.required", ["hits", "total"])),
    "output.property_removed": (open_output(), open_output("status")),
    "output.property_added": (open_output(), open_output("score", {"type": "number"})),
    "output.closed_property_removed": (view(), edit(f"{OUT}.status", delete=True)),
    "output.closed_property_added": (view(), edit(f"{OUT}.score", {"type": "number"})),
    "output.type_widened": (view(), edit(f"{OUT}.total.type", ["integer", "null"])),
    "output.type_narrowed": (edit(f"{OUT}.total.type", ["integer", "null"]), view()),
    "output.enum_widened": (view(), edit(f"{OUT}.status.enum", ["ok", "empty", "partial"])),
    "output.enum_narrowed": (view(), edit(f"{OUT}.status.enum", ["ok"])),
    "output.bound_widened": (view(), edit(f"{OUT}.hits.maxItems", 200)),
    "output.bound_narrowed": (view(), edit(f"{OUT}.total.maximum", 10)),
    "output.opened": (view(), edit("success_schema.additionalProperties", True)),
    "output.closed": (edit("success_schema.additionalProperties", True), view()),
    "output.constraint_changed": (view(), edit(f"{OUT}.hits.items.pattern", "^y")),
    "output.default_changed": (view(), edit(f"{OUT}.total.default", 0)),
    "output.prose_changed": (view(), edit(f"{OUT}.total.description", "how many matched")),
    "error.removed": (view(), view(errors={})),
    "error.added": (view(), view(errors={"x_err": {"meaning": "x"}, "y_err": {"meaning": "y"}})),
    "error.renamed": (view(), view(errors={"x_error": {"meaning": "x", "retryable": False}})),
    "error.retryable_changed": (view(), view(errors={"x_err": {"meaning": "x", "retryable": True}})),
    "error.prose_changed": (view(), view(errors={"x_err": {"meaning": "x, said better", "retryable": False}})),
    "endpoint.removed": (view(), view(endpoints={})),
    "endpoint.added": (view(endpoints={}), view()),
    "endpoint.auth_tightened": (view(), ep(auth="sysadmin")),
    "endpoint.auth_loosened": (view(), ep(auth="none")),
    "endpoint.status_added": (view(), ep(errors=[400, 413])),
    "endpoint.status_removed": (view(), ep(errors=[])),
    "endpoint.prose_changed": (view(), ep(summary="reworded")),
    "ddl.table_removed": (view(), view(ddl="")),
    "ddl.table_added": (view(), view(ddl=DDL + "create table u (x text);")),
    "ddl.column_removed": (view(), view(ddl="create table t (id integer primary key, b text not null default '');")),
    "ddl.column_added": (view(), view(ddl=DDL.replace("a text,", "a text, c text,"))),
    "ddl.column_required": (view(), view(ddl=DDL.replace("a text,", "a text not null,"))),
    "ddl.column_optional": (view(ddl=DDL.replace("a text,", "a text not null,")), view()),
    "ddl.column_type_changed": (view(), view(ddl=DDL.replace("a text,", "a integer,"))),
}


def test_every_rule_has_its_own_case():
    assert set(CASES) == set(RULES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_rule_is_detected_and_classified_by_the_table(kind):
    old, new = CASES[kind]
    changes = diff(old, new)
    assert kind in {c.kind for c in changes}, [c.kind for c in changes]
    assert {c.cls for c in changes if c.kind == kind} == {RULES[kind].cls}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_swapping_the_sides_shows_the_inverse_rule(kind):
    old, new = CASES[kind]
    assert RULES[kind].inverse in {c.kind for c in diff(new, old)}


def test_every_rule_names_a_real_inverse_and_a_class():
    for rule in RULES.values():
        assert RULES[rule.inverse].inverse == rule.kind
        assert rule.cls in (BREAKING_CLIENTS, BREAKING_IMPLEMENTATIONS, COMPATIBLE)


def test_identical_views_have_no_changes():
    assert diff(view(), copy.deepcopy(view())) == []


def test_moving_a_definition_behind_a_ref_changes_nothing():
    inline = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}}
    by_ref = {"type": "object", "$defs": {"A": {"type": "string", "maxLength": 3}}, "properties": {"a": {"$ref": "#/$defs/A"}}}
    assert list(schema_changes("tool", "t", "input", inline, by_ref, "input")) == []


# --- symmetry over generated schemas ------------------------------------------------------------

leaf = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["string", "integer", "number", ["integer", "null"]]),
    "maxLength": st.integers(0, 5), "minimum": st.integers(-2, 2), "maximum": st.integers(3, 6),
    "enum": st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
    "pattern": st.sampled_from(["^a", "^b"]), "description": st.sampled_from(["x", "y"]),
})
schemas = st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(
    st.sampled_from(["p", "q", "r"]), leaf, max_size=3)}, optional={
    "required": st.lists(st.sampled_from(["p", "q", "r"]), unique=True, max_size=3),
    "additionalProperties": st.booleans()})


@settings(max_examples=200, deadline=None)
@given(schemas, schemas, st.sampled_from(["input", "output"]))
def test_a_change_and_its_inverse_classify_consistently(a, b, direction):
    forward = {(c.where, c.kind) for c in schema_changes("tool", "t", direction, a, b, direction)}
    backward = {(c.where, RULES[c.kind].inverse) for c in schema_changes("tool", "t", direction, b, a, direction)}
    assert forward == backward
    for _where, kind in forward:
        inverse = RULES[kind].inverse
        # An edit never breaks nobody in both directions: a wider input is a narrower one undone.
        if inverse != kind:
            assert (RULES[kind].cls, RULES[inverse].cls) != (COMPATIBLE, COMPATIBLE)


def test_spec_readme_documents_every_rule_with_its_class_and_example():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "spec" / "README.md").read_text()
    labels = {BREAKING_CLIENTS: "breaking (clients)", BREAKING_IMPLEMENTATIONS: "breaking (implementations)",
              COMPATIBLE: "compatible"}
    for rule in RULES.values():
        assert f"| `{rule.kind}` | {labels[rule.cls]} | {rule.example} | `{rule.inverse}` |" in readme, rule.kind

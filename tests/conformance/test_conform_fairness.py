"""The suite judges other implementations fairly: a server that words, orders and encodes things
its own way, or speaks an older protocol revision, passes exactly as ours does; real bugs still fail."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest

from fair_proxy import inline_refs, reworded, success_only
from knowspec.conformance.checks.listing import input_schema_problems, output_schema_problems
from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import load_contract
from knowspec.conformance.runner import EXIT_OK, EXIT_UNREACHABLE, run_to_end

CONTRACT = load_contract()
TARGETS = Path(__file__).parent / "targets"
KNOWSPEC = str(Path(sys.executable).parent / "knowspec")


def _output(tool):
    return copy.deepcopy(tool.output_schema)


@pytest.mark.parametrize("tool", CONTRACT.tools, ids=lambda t: t.name)
def test_reworded_input_schemas_differ_only_in_prose(tool):
    failures, notes = input_schema_problems(tool, reworded(copy.deepcopy(tool.input_schema)))
    assert failures == []
    assert notes


@pytest.mark.parametrize("tool", CONTRACT.tools, ids=lambda t: t.name)
def test_success_only_and_inlined_output_schemas_mean_the_contract(tool):
    alone = success_only(_output(tool))
    for advertised in (alone, inline_refs(alone, alone.get("$defs", {})), reworded(_output(tool))):
        failures, _notes = output_schema_problems(tool, advertised)
        assert failures == []


def _first_with(keyword):
    for tool in CONTRACT.tools:
        for name, prop in tool.input_properties.items():
            if keyword in prop:
                return tool, name
    raise AssertionError(keyword)


@pytest.mark.parametrize("keyword,change", [
    ("maxLength", lambda p: p.update(maxLength=p["maxLength"] + 1)),
    ("enum", lambda p: p.update(enum=p["enum"][:-1])),
    ("type", lambda p: p.update(type="number" if p["type"] != "number" else "string")),
])
def test_a_structural_change_to_an_input_schema_fails(keyword, change):
    tool, name = _first_with(keyword)
    schema = copy.deepcopy(tool.input_schema)
    change(schema["properties"][name])
    failures, _ = input_schema_problems(tool, schema)
    assert failures and name in failures[0]


def test_a_dropped_required_property_fails():
    tool = next(t for t in CONTRACT.tools if t.required_inputs)
    schema = copy.deepcopy(tool.input_schema)
    schema["required"] = schema["required"][1:]
    assert input_schema_problems(tool, schema)[0]


def test_an_output_schema_with_a_changed_field_type_fails():
    tool = CONTRACT.tool("doc_links")
    alone = success_only(_output(tool))
    text = json.dumps(alone).replace('"slug": {"type": "string"}', '"slug": {"type": "integer"}', 1)
    assert text != json.dumps(alone)
    failures, _ = output_schema_problems(tool, json.loads(text))
    assert failures


# ---- whole runs through the fair proxy -------------------------------------------------------

def _fair_target(app: Path, seed: int, only_2025: bool) -> str:
    server = f"{KNOWSPEC} serve --stdio --appdir {app} --database demo"
    flag = " --only-2025" if only_2025 else ""
    return f"stdio:{sys.executable} {TARGETS / 'fair_proxy.py'} --seed {seed}{flag} -- {server}"


@pytest.fixture(scope="module")
def demo_app(tmp_path_factory):
    import subprocess

    app = tmp_path_factory.mktemp("fair-app")
    subprocess.run([KNOWSPEC, "demo", "--appdir", str(app)], check=True, capture_output=True)
    return app


def _bad(finished):
    return [(r.case_id, (r.failure.message if r.failure else r.reason)[:300])
            for r in finished.results if r.status in ("failed", "error")]


SEEDS = [int(s) for s in os.environ.get("KNOWSPEC_FAIRNESS_SEEDS", "1").split(",") if s.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("era,only_2025", [("legacy", False), ("modern", True)])
def test_a_differently_worded_conformant_server_passes_every_check(demo_app, seed, era, only_2025):
    finished = run_to_end(RunConfig(target=_fair_target(demo_app, seed, only_2025), family="all", era=era,
                                    seed=seed, max_examples=4, call_timeout=120.0, exclude=("cancellation",)))
    assert _bad(finished) == []
    assert finished.exit_code == EXIT_OK
    assert finished.protocol == ("2025-11-25" if only_2025 else finished.protocol)
    infos = [r for r in finished.results if r.check_id == "tools_list"]
    assert infos and all(r.status == "info" for r in infos)


def test_a_target_whose_tools_list_is_broken_gets_exit_2_not_a_traceback(tmp_path):
    server = tmp_path / "broken.py"
    server.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if 'id' not in m: continue\n"
        "    if m['method'] == 'initialize':\n"
        "        r = {'protocolVersion': '2025-11-25', 'capabilities': {'tools': {}},\n"
        "             'serverInfo': {'name': 'broken', 'version': '0'}}\n"
        "    elif m['method'] == 'tools/list':\n"
        "        r = {'tools': 'not a list'}\n"
        "    else:\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': -32601, 'message': 'no'}}), flush=True); continue\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n")
    for era in ("legacy", "modern"):
        finished = run_to_end(RunConfig(target=f"stdio:{sys.executable} {server}", era=era, checks=("tools_list",)))
        assert finished.exit_code == EXIT_UNREACHABLE

"""Every command in README.md and conformance/README.md runs as written.

``ROWS`` says how this test runs each documented command line; a command the READMEs gain without
a row (or a row whose command left the READMEs) fails ``test_every_documented_command_has_a_row``,
so the documents and this test move together. Commands run in a sandbox folder laid out like a
checkout (``.venv`` and ``examples/`` linked in), with two substitutions only: the HTTP port 8765
becomes a free port, and the ``...`` password placeholder a real password. A long run gets
narrowing options appended (never different ones), so the documented call itself is what runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from serving import free_port, serving

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = (REPO / "README.md", REPO / "conformance" / "README.md")
PASSWORD = "readme-admin-pw"
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "readme", "version": "0"}}}) + "\n"
# One cheap check and tool: enough to prove the documented call works end to end.
NARROW = " --check tools_list --tool list_concepts"


@dataclass(frozen=True)
class Row:
    """How one documented command is exercised.

    kind: ``run`` (bash in the sandbox, exit 0, ``expect`` in the output), ``stdio`` (``run`` with an
    MCP initialize on stdin), ``http`` (a server kept running for the following rows), ``synopsis``
    (every ``--option`` it names exists), ``elsewhere`` (``expect`` names the test that runs it).
    """

    kind: str
    block: str = ""        # rows of one block run in document order in one sandbox
    append: str = ""       # narrowing options appended to a long run
    expect: str = ""
    stdin: str = ""


ROWS: dict[str, Row] = {
    # README: two commands on a fresh machine (the scripts are setup + one knowspec command each)
    "scripts/demo": Row("elsewhere", expect="tests/test_demo.py::test_demo_builds_pools_and_calls_tools_over_stdio"),
    "scripts/test": Row("elsewhere", expect="tests/test_documented_commands.py (the suite it runs includes this file)"),
    # README: everyday commands
    ".venv/bin/knowspec --version": Row("run", "everyday", expect="knowspec 0.1.0"),
    ".venv/bin/knowspec serve --stdio": Row("stdio", "everyday", expect='"serverInfo":{"name":"knowspec"',
                                            stdin=INITIALIZE),
    ".venv/bin/knowspec serve --http 127.0.0.1:8765 --bundle-root /srv/kb": Row("http", "everyday"),
    ".venv/bin/knowspec serve --http 127.0.0.1:8765 --bundle-root /srv/kb --workers 2":
        Row("elsewhere", expect="tests/server/test_http_workers.py::test_a_login_on_one_worker_is_honoured_by_the_other"),
    ".venv/bin/knowspec spec diff git:HEAD~1 spec":
        Row("elsewhere", expect="tests/codegen/test_spec_diff_cli.py::test_a_git_revision_reads_that_revision_of_the_spec"),
    # writing into a temporary folder: the same call, without touching the checkout's generated/
    ".venv/bin/knowspec codegen": Row("run", "everyday", append=" --out generated-copy", expect="changed files"),
    ".venv/bin/knowspec codegen --check": Row("run", "everyday", expect="generated/ is up to date"),
    '.venv/bin/knowspec conform --target stdio:".venv/bin/knowspec serve --stdio" --junit reports/conformance.xml':
        Row("run", "everyday", append=NARROW, expect="passed"),
    # README: installing the package
    ".venv/bin/python -m build --outdir dist": Row("elsewhere", expect="tests/packaging/test_wheel.py"),
    "python3 -m venv /tmp/knowspec-venv": Row("elsewhere", expect="tests/packaging/test_wheel.py"),
    '/tmp/knowspec-venv/bin/pip install "dist/knowspec-0.1.0-py3-none-any.whl[vectors]"':
        Row("elsewhere", expect="tests/packaging/test_wheel.py"),
    # README: document pools (each step's output is the next one's input)
    "K=.venv/bin/knowspec": Row("run", "pools"),
    "$K pool build examples/help help.db --collection netsim-help": Row("run", "pools", expect='"topic": 20'),
    "$K model build": Row("run", "pools", expect="model pack written to"),
    "$K pool build examples/okf-sample pool.db --collection docs --model": Row("run", "pools", expect='"topic_vec": 16'),
    "$K pool register shop --storage SQLITE --dsn shop-docs.db": Row("run", "pools", expect='"name": "shop"'),
    '$K pool alter "ALTER DATABASE shop SET DOCUMENTS INTERNAL"': Row("run", "pools", expect='"documents": "INTERNAL"'),
    "$K pool import --database shop --collection docs pool.db": Row("run", "pools", expect="imported docs: 16 topics"),
    "$K user add admin --password-stdin --role SYSADMIN": Row("run", "pools", expect="SYSADMIN", stdin=PASSWORD + "\n"),
    "$K user list": Row("run", "pools", expect="admin\tSYSADMIN"),
    "$K serve --http 127.0.0.1:8765 --database shop": Row("http", "pools"),
    # README: conformance suite (against the server of the pools block)
    '$K conform --target stdio:"$K serve --stdio" --family all --seed 1 --junit reports/c.xml --json reports/c.json '
    "--html reports/c.html": Row("run", "pools", append=NARROW, expect="passed"),
    "mkdir -p /tmp/conform-bundles": Row("run", "pools"),
    "$K serve --http 127.0.0.1:8765 --database shop --bundle-root /tmp/conform-bundles": Row("http", "pools"),
    # the checks that need what the server must be given: bundles it may read, the pool it imports
    "KNOWSPEC_CONFORM_ADMIN_PASSWORD=... $K conform --target http://127.0.0.1:8765/mcp --era modern "
    "--rest-url http://127.0.0.1:8765 --admin-user admin --bundle-dir /tmp/conform-bundles "
    "--pool-dir .knowspec/imports":
        Row("run", "pools", append=" --check oracle_list_concepts --check docpool_import --check docpool_import_answers "
                                   "--tool list_concepts --tool doc_get", expect="exit 0"),
    '$K conform mutants --server "$K serve --stdio" --kill-rate':
        Row("run", "pools", append=" --mutant search_reverse_hits --tool search_concepts --check result_ordering",
            expect="kill rate 1/1"),
    '$K conform mutants --kill-rate --min-rate 0.95 --json killrate.json --server ".venv/bin/python '
    'tests/conformance/mutant_host.py --control {control} --pool {pool} --admin {admin} --reader {reader} '
    '--vectors --http 127.0.0.1:{port}"':
        Row("elsewhere", expect="tests/conformance/test_conform_mutants.py::"
                                "test_host_mode_kills_server_side_mutants_a_proxy_cannot_fake"),
    "$K conform fixture --out DIR": Row("run", "pools", expect='"database": "conform"'),
    # conformance/README.md: synopses (their options must exist)
    'knowspec conform --target stdio:"knowspec serve --stdio" [--family okf|docpool|all] [--era legacy|modern] '
    "[--seed N] [--max-examples N] [--time-budget S] [--contract FILE] [--baseline FILE] [--write-baseline FILE] "
    "[--junit F] [--json F] [--html F] [--text F] [--bundle-dir DIR] [--tool NAME]... [--check ID]... "
    "[--shared-session] [--workers N] [--strict] [--advertised-only] [--unknown-tool jsonrpc|result|either] "
    "[--list-checks]": Row("synopsis"),
    'knowspec conform mutants --server "<host> --control {control} --pool {pool} --admin {admin} --reader {reader} '
    '--http 127.0.0.1:{port}" [--jobs N] [--quick] [--kill-rate --min-rate 0.95] [--json killrate.json]':
        Row("synopsis"),
    "knowspec conform fixture --out DIR [--seed N]": Row("synopsis"),
    # conformance/README.md: the pool fixture two-step, run as written (knowspec on PATH)
    "knowspec conform fixture --out DIR --seed 1": Row("run", "fixture", expect='"database": "conform"'),
    "knowspec pool register conform --storage SQLITE --dsn DIR/docs.db --appdir DIR":
        Row("run", "fixture", expect='"name": "conform"'),
    'knowspec pool alter "ALTER DATABASE conform SET DOCUMENTS INTERNAL" --appdir DIR':
        Row("run", "fixture", expect='"documents": "INTERNAL"'),
    'knowspec conform --target stdio:"knowspec serve --stdio --appdir DIR --help-db DIR/help.db --database conform" '
    "--pool-fixture DIR": Row("run", "fixture", append=" --family docpool --tool doc_get --tool help_get_topic",
                              expect="passed"),
    'knowspec conform mutants --server "knowspec serve --stdio" [--tool NAME]... [--kill-rate] [--json F]':
        Row("synopsis"),
    "knowspec conform --target http://127.0.0.1:8000/mcp --rest-url http://127.0.0.1:8000 --admin-user ADMIN "
    "--admin-password PW [--reader-user U --reader-password PW] [--pool-dir DIR] [--pool-database DB]":
        Row("synopsis"),
}


def documented_commands(path: Path) -> list[str]:
    """Command lines of a Markdown file: each line of a ``bash`` block (continuations joined,
    trailing comments dropped), and each ``knowspec ...`` synopsis of a plain block."""
    commands: list[str] = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M):
        if lang not in ("bash", ""):
            continue
        body = re.sub(r"\\\n\s*", "", body)
        keep = False
        for raw in body.splitlines():
            if lang == "" and raw[:1].isspace():  # a synopsis wrapped over several lines
                if keep:
                    commands[-1] += " " + raw.strip()
                continue
            keep = lang == "bash" or raw.startswith("knowspec ")
            line = re.sub(r"\s{2,}#.*$", "", raw).strip()
            if keep and line:
                commands.append(line)
    return commands


def all_documented() -> list[str]:
    return [c for path in DOCUMENTS for c in documented_commands(path)]


def test_every_documented_command_has_a_row():
    documented = all_documented()
    missing = [c for c in documented if c not in ROWS]
    stale = [c for c in ROWS if c not in documented]
    assert not missing, f"documented commands without a row in ROWS: {missing}"
    assert not stale, f"rows whose command is no longer documented: {stale}"


def test_elsewhere_rows_name_an_existing_test():
    for command, row in ROWS.items():
        if row.kind == "elsewhere":
            target = row.expect.split(" ")[0]
            path, _, name = target.partition("::")
            assert (REPO / path).is_file(), (command, target)
            assert not name or f"def {name}(" in (REPO / path).read_text(encoding="utf-8"), (command, target)


@pytest.mark.parametrize("command", [c for c, r in ROWS.items() if r.kind == "synopsis"])
def test_synopsis_options_exist(command):
    from knowspec.impl.cli import build_parser

    sub = ["conform", *command.split()[2:3]] if command.split()[2] in ("mutants", "fixture") else ["conform"]
    known = _options_of(build_parser(), sub)
    named = set(re.findall(r"--[a-z][a-z-]*", re.sub(r'"[^"]*"', "", command)))  # not the quoted server command
    assert named and named <= known, f"options the parser lacks: {sorted(named - known)}"


def _options_of(parser, path: list[str]) -> set[str]:
    import argparse

    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return {o for a in parser._actions for o in a.option_strings}


# -- running the blocks ------------------------------------------------------------------------

@pytest.fixture()
def sandbox(tmp_path, monkeypatch):
    """A folder laid out like a checkout, made the current one: relative paths resolve as documented,
    and state goes to the documented default ./.knowspec."""
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KNOWSPEC_APPDIR", raising=False)
    return tmp_path


def run_block(block: str, sandbox: Path) -> list[str]:
    """Run the rows of ``block`` in document order in ``sandbox``; return what ran."""
    port = free_port()
    prefix = 'export PATH="$PWD/.venv/bin:$PATH"; '  # `knowspec` as an installed command; K=... carries over
    ran = []
    with ExitStack() as servers:
        for command in all_documented():
            row = ROWS[command]
            if row.block != block:
                continue
            line = (command.replace("8765", str(port)).replace("PASSWORD=...", f"PASSWORD={PASSWORD}")
                    + row.append)
            if re.fullmatch(r"\w+=\S+", line):
                prefix += line + "; "
                continue
            if row.kind == "http":  # kept running for the rows that follow, in place of an earlier one
                servers.close()
                servers.enter_context(serving(["bash", "-c", f"{prefix}exec {line}"], port, timeout=60))
                ran.append(line)
                continue
            out = subprocess.run(["bash", "-c", prefix + line], cwd=sandbox, input=row.stdin, text=True,
                                 capture_output=True, timeout=600)
            both = out.stdout + out.stderr
            assert out.returncode == 0, f"{command!r} exited {out.returncode}:\n{both[-3000:]}"
            assert row.expect in both, f"{command!r} did not print {row.expect!r}:\n{both[-3000:]}"
            ran.append(line)
    return ran


def test_everyday_commands_run_as_written(sandbox):
    ran = run_block("everyday", sandbox)
    assert len(ran) == sum(r.block == "everyday" for r in ROWS.values())
    assert (sandbox / "reports" / "conformance.xml").is_file()  # the report's folder was made
    copy = sandbox / "generated-copy"
    assert (copy / "contract.json").read_text("utf-8") == (REPO / "generated" / "contract.json").read_text("utf-8")


@pytest.mark.slow
def test_pool_and_conformance_blocks_chain_as_written(sandbox):
    ran = run_block("pools", sandbox)
    assert len(ran) == sum(r.block == "pools" for r in ROWS.values()) - 1  # K=... is a prefix
    appdir = sandbox / ".knowspec"
    assert {p.name for p in appdir.iterdir()} >= {"help.db", "pool.db", "shop-docs.db", "catalog.db", "models"}
    assert (appdir / "models" / "e5-int8" / "pack.json").is_file()
    assert all((sandbox / "reports" / name).is_file() for name in ("c.xml", "c.json", "c.html"))
    assert not (sandbox / "APPDIR").exists() and not (sandbox / "help.db").exists()


def test_demo_http_serves_after_set_up(tmp_path):
    """`scripts/demo --http HOST:PORT` is setup + `knowspec demo --http HOST:PORT`: it must serve."""
    import urllib.request

    port = free_port()
    argv = [sys.executable, "-m", "knowspec.impl.cli", "demo", "--http", f"127.0.0.1:{port}", "--appdir", str(tmp_path)]
    with serving(argv, port, timeout=120) as url:
        with urllib.request.urlopen(f"{url}/openapi.json", timeout=30) as answer:
            assert answer.status == 200 and json.loads(answer.read())["openapi"].startswith("3.")


def test_mcp_client_configuration_names_absolute_paths_the_server_accepts():
    from knowspec.impl.cli import build_parser

    blocks = re.findall(r"^```json\n(.*?)^```", (REPO / "README.md").read_text("utf-8"), re.S | re.M)
    (server,) = json.loads(blocks[0])["mcpServers"].values()
    assert server["command"].startswith("/") and server["command"].endswith("/.venv/bin/knowspec")
    args = build_parser().parse_args(server["args"])
    assert args.stdio and args.appdir.is_absolute()


@pytest.mark.slow
def test_pool_fixture_two_step_runs_as_written(sandbox):
    """conformance/README.md: write the suite's pools, start our server on them, judge the doc tools."""
    ran = run_block("fixture", sandbox)
    assert len(ran) == sum(r.block == "fixture" for r in ROWS.values())
    assert {"help.db", "docs.db", "fixture.json"} <= {p.name for p in (sandbox / "DIR").iterdir()}

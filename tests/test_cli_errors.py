"""Every bad argument gets one line and exit 2; an unexpected failure one line and a --debug hint."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knowspec.impl.cli import main
from serving import free_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "help"


def run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exit
        code = exc.code
    return code, capsys.readouterr().err


def assert_one_line_error(code: int, err: str, fragment: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert fragment in err


@pytest.mark.parametrize(("argv", "fragment"), [
    (["pool", "build", "{tmp}/nonexistent", "{tmp}/x.db", "--collection", "abc"], "folder not found"),
    (["pool", "build", str(EXAMPLES), "{tmp}", "--collection", "abc"], "is a folder"),
    (["pool", "build", str(EXAMPLES), "{tmp}/x.db", "--collection", "BadName"], "invalid collection name 'BadName'"),
    (["pool", "build", str(EXAMPLES), "{tmp}/x.db", "--collection=-abc"], "invalid collection name"),
    (["pool", "build", str(EXAMPLES), "{tmp}/x.db", "--collection", "abc", "--model", "{tmp}/nopack"],
     "folder not found"),
    (["pool", "import", "--database", "shop", "--collection", "Bad_Name", "{tmp}/src.db", "--appdir", "{tmp}"],
     "invalid collection name"),
    (["pool", "import", "--database", "shop", "--collection", "abc", "{tmp}/src.db", "--appdir", "{tmp}"],
     "file not found"),
    (["pool", "register", "x", "--storage", "MYSQL", "--dsn", "{tmp}/x.db", "--appdir", "{tmp}"],
     "unknown storage 'MYSQL'"),
    (["pool", "register", "x", "--storage", "POSTGRESQL", "--dsn", "{tmp}/x.db", "--appdir", "{tmp}"],
     "not a PostgreSQL conninfo"),
    (["pool", "register", "x", "--storage", "SQLITE", "--dsn", "host=db dbname=x", "--appdir", "{tmp}"],
     "looks like a PostgreSQL conninfo"),
    (["pool", "register", "x", "--storage", "SQLITE", "--dsn", "{tmp}/no/x.db", "--appdir", "{tmp}"],
     "folder not found"),
    (["serve", "--http", "localhost"], "expected HOST:PORT"),
    (["serve", "--http", "127.0.0.1:70000"], "out of range"),
    (["serve", "--stdio", "--call-timeout", "-1"], "expected a positive number"),
    (["--log-level", "verbose", "pool", "databases"], "unknown log level 'verbose'"),
    (["codegen", "--check", "--spec", "{tmp}/nospec"], "folder not found"),
    (["model", "check", "--dir", "{tmp}/nopack"], "folder not found"),
    (["model", "build", "--source", "gpt", "--out", "{tmp}/pack"], "unknown model source 'gpt'"),
    (["model", "build", "--source", "hf:{tmp}/nomodel", "--out", "{tmp}/pack"], "folder not found"),
    (["conform", "--target", "http://127.0.0.1:1/mcp", "--max-examples", "0"], "expected a number above 0"),
    (["conform", "--target", "http://127.0.0.1:1/mcp", "--time-budget", "soon"], "expected a number, got 'soon'"),
])
def test_a_bad_argument_is_one_line_and_exit_2(argv, fragment, tmp_path, capsys):
    code, err = run([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert_one_line_error(code, err, fragment)


def test_the_valid_forms_pass_the_validators():
    from knowspec.impl import cli_args

    assert cli_args.host_port("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert cli_args.host_port(":0") == ("127.0.0.1", 0)
    assert cli_args.host_port("[::1]:9000") == ("::1", 9000)
    assert cli_args.storage_name("sqlite") == "SQLITE"
    assert cli_args.collection_name("netsim-help") == "netsim-help"
    assert cli_args.log_level("debug") == "DEBUG"
    assert cli_args.check_dsn("POSTGRESQL", "postgresql://u@h/db") == "postgresql://u@h/db"
    assert cli_args.check_dsn("POSTGRESQL", "host=h dbname=d") == "host=h dbname=d"


@pytest.mark.parametrize(("argv", "suggestion"), [
    (["poool"], "did you mean 'pool'?"),
    (["pool", "buidl"], "did you mean 'build'?"),
    (["conform", "--family", "okff"], "did you mean 'okf'?"),
    (["pool", "build", str(EXAMPLES), "x.db", "--colection", "abc"], "did you mean '--collection'?"),
    (["serve", "--htp", "127.0.0.1:0"], "did you mean '--http'?"),
])
def test_a_mistyped_command_gets_a_suggestion(argv, suggestion, capsys):
    code, err = run(argv, capsys)
    assert_one_line_error(code, err, suggestion)


def test_a_mistyped_command_far_from_any_gets_no_suggestion(capsys):
    code, err = run(["zzzzzz"], capsys)
    assert_one_line_error(code, err, "unknown command 'zzzzzz'")
    assert "did you mean" not in err


@pytest.fixture()
def broken_listing(monkeypatch):
    from knowspec.impl.docpool import catalog

    def fail(path):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(catalog, "list_databases", fail)


def test_an_unexpected_failure_is_one_line_with_a_debug_hint(broken_listing, tmp_path, capsys):
    code, err = run(["pool", "databases", "--appdir", str(tmp_path)], capsys)
    assert code == 1
    assert err == ("knowspec pool databases: failed: OperationalError: disk I/O error "
                   "(run again with --debug for the traceback)\n")


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(broken_listing, tmp_path, capsys, where):
    argv = ["pool", "databases", "--appdir", str(tmp_path)]
    argv = ["--debug", *argv] if where == "before" else [*argv, "--debug"]
    code, err = run(argv, capsys)
    assert code == 1
    assert err.startswith("Traceback") and "sqlite3.OperationalError: disk I/O error" in err


def test_conform_names_a_refused_connection(capsys):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    code, err = run(["conform", "--target", url, "--family", "okf"], capsys)
    assert code == 2
    assert f"cannot reach {url}: connection refused" in err
    assert "ExceptionGroup" not in err and "TaskGroup" not in err


def test_conform_names_a_missing_stdio_command(capsys):
    code, err = run(["conform", "--target", "stdio:knowspec-no-such-command --x", "--family", "okf"], capsys)
    assert code == 2
    assert "stdio command not found: knowspec-no-such-command" in err


def test_serve_on_a_taken_port_is_one_line(tmp_path, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = run(["serve", "--http", f"127.0.0.1:{port}", "--appdir", str(tmp_path)], capsys)
    assert code == 1
    assert err.startswith(f"knowspec serve: cannot listen on 127.0.0.1:{port}: ") and err.count("\n") == 1, err


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    # `knowspec conform --list-checks | head -5`: the pipe closes before the listing ends.
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the first write (or the exit's flush) gets EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "conform", "--list-checks"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr  # 128 + SIGPIPE, as a shell reports a writer stopped so
    assert done.stderr == ""


def test_serving_an_empty_state_folder_says_what_the_help_and_doc_tools_lack(tmp_path):
    initialize = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
                  '"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n')
    done = subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir", str(tmp_path)],
                          input=initialize, capture_output=True, text=True, timeout=120)
    assert '"serverInfo"' in done.stdout
    assert "no help pool at" in done.stderr and "knowspec pool build" in done.stderr
    assert "no document database is registered" in done.stderr and "knowspec pool register" in done.stderr
    assert not any(tmp_path.iterdir())  # looking created nothing


def test_serving_a_prepared_state_folder_prints_no_notes(tmp_path):
    from knowspec.impl.cli import _state_notes
    from knowspec.impl.config import Settings
    from knowspec.impl.demo import prepare

    settings = Settings(appdir=tmp_path)
    list(prepare(settings))  # it serves with --database demo
    assert _state_notes(settings) == []
    settings.default_database = None  # the same folder served without --database: say so, and what is there
    unnamed = _state_notes(settings)
    assert len(unnamed) == 1 and "no --database given" in unnamed[0] and "registered: demo" in unnamed[0]


def test_an_http_server_makes_the_folder_importdoc_reads_from(tmp_path):
    from serving import serving

    port = free_port()
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(tmp_path)], port):
        imports = tmp_path / "imports"
        deadline = time.monotonic() + 30
        while not imports.is_dir() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert imports.is_dir() and stat.S_IMODE(imports.stat().st_mode) == 0o700

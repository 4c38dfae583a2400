"""A server that answers only OKF tools never loads the document tools' libraries.

Issue #18 goal 6 (the OKF server's memory): numpy, the pool storages, the vector runtime and the
conformance suite cost tens of MiB of resident memory; ``serve`` mounts only its own command and
resolves each handler at its first call, and the pool warm-up reads the catalog before it loads
any storage. Nor does ``search_concepts``: its index is plain arrays and integer bitmaps, and the
bodies' signatures are made by a helper process (``index_helper``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from knowspec.impl.cli import _names_serve, build_parser
from serving import stdio_tool_answers

BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "okf" / "v02" / "scorecard"
NOT_FOR_OKF = ("numpy", "onnxruntime", "knowspec.impl.docpool.storage", "knowspec.impl.docpool.fulltext",
               "knowspec.impl.docpool.vectors", "knowspec.impl.docpool.tools", "knowspec.conformance")


def _serve_and_report(tmp_path: Path, calls: list[dict]) -> tuple[list[dict], set[str]]:
    """Serve over stdio in a fresh interpreter, answer ``calls``; the answers and the modules loaded."""
    report = tmp_path / "loaded.json"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import atexit, json, sys, threading\n"
        "report = sys.argv[1]\n"
        "def dump():\n"
        "    for thread in threading.enumerate():  # the pool warm-up, if still reading the catalog\n"
        "        if thread.name == 'knowspec-pool-warmup':\n"
        "            thread.join(30)\n"
        "    open(report, 'w').write(json.dumps(sorted(sys.modules)))\n"
        "atexit.register(dump)\n"
        "sys.argv = ['knowspec', 'serve', '--stdio', '--appdir', sys.argv[2]]\n"
        "from knowspec.impl.cli import main\n"
        "sys.exit(main())\n", encoding="utf-8")
    answers = stdio_tool_answers([sys.executable, str(probe), str(report), str(tmp_path / "app")], calls,
                                 list_tools=True)
    return answers, set(json.loads(report.read_text()))


def _loaded_of(loaded: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_serving_okf_tools_loads_no_document_pool_library_nor_numpy(tmp_path):
    path = str(BUNDLE)
    # search_concepts: trigrams, a separator join (signed by the helper), a short scan
    calls = [{"name": name, "arguments": {"bundle_path": path, **extra}} for name, extra in (
        ("list_concepts", {}), ("read_concept", {"concept_id": "metrics/delivery-scorecard"}),
        ("get_neighbors", {"concept_id": "metrics/delivery-scorecard"}), ("search_sections", {"query": "rate"}),
        ("search_concepts", {"query": "rate"}), ("search_concepts", {"query": "on-time delivery"}),
        ("search_concepts", {"query": "la"}), ("validate_bundle", {}), ("get_semantic_graph", {}))]
    answers, loaded = _serve_and_report(tmp_path, calls)
    assert all(not a["result"]["isError"] for a in answers), answers
    assert _loaded_of(loaded, NOT_FOR_OKF) == []


HTTP_STACK = ("starlette", "uvicorn", "sse_starlette", "click", "mcp.server.streamable_http",
              "mcp.server.streamable_http_manager", "mcp.server.auth", "mcp.server.transport_security")


def test_a_stdio_server_loads_no_http_stack(tmp_path):
    answers, loaded = _serve_and_report(tmp_path, [{"name": "list_concepts", "arguments": {"bundle_path": str(BUNDLE)}}])
    assert not answers[0]["result"]["isError"]
    assert "mcp.server.lowlevel.server" in loaded and _loaded_of(loaded, HTTP_STACK) == []


def test_a_doc_tool_still_loads_its_modules_at_its_first_call(tmp_path):
    answers, loaded = _serve_and_report(tmp_path, [{"name": "help_search", "arguments": {"query": "x"}}])
    assert len(answers) == 1 and "result" in answers[0]
    assert "knowspec.impl.docpool.tools" in loaded


def test_only_a_serve_command_line_skips_the_other_commands():
    assert _names_serve(["serve", "--stdio"]) and _names_serve(["--log-level", "DEBUG", "--debug", "serve"])
    assert not _names_serve(["pool", "build", "serve"]) and not _names_serve(["--log-level", "serve"])
    assert not _names_serve([]) and not _names_serve(["--version"])
    assert set(build_parser(only_serve=True)._subparsers._group_actions[0].choices) == {"serve"}


def test_a_catalog_that_names_a_pool_has_the_document_tools_loaded_before_any_call(tmp_path):
    from knowspec.impl.config import Settings
    from knowspec.impl.docpool import catalog

    catalog_path = Settings(appdir=tmp_path / "app").catalog_path
    catalog.register_database(catalog_path, "shop", "SQLITE", str(tmp_path / "shop-docs.db"))
    catalog.execute_alter(catalog_path, "ALTER DATABASE shop SET DOCUMENTS INTERNAL")
    _, loaded = _serve_and_report(tmp_path, [])
    assert "knowspec.impl.docpool.tools" in loaded  # imported before serving: not in the first search

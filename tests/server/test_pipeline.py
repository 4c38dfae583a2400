"""The call pipeline through a real in-memory MCP client: envelope, codes, text, redaction."""

from __future__ import annotations

import json
import threading
import time

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError

from knowspec.impl.context import ToolOutput
from knowspec.impl.errors import ToolError
from knowspec.impl.server.mcp_server import build_server
from knowspec.impl.server.pipeline import ToolRuntime


def echo_text(args, ctx):
    return ToolOutput({"text": args.text, "items": [{"text": args.text}] * min(args.limit, 3)})


def echo_list(args, ctx):
    return ToolOutput({"results": [{"text": args.text, "kind": "a"}]})


def call(registry, handlers, name, arguments, **runtime_kw):
    runtime = ToolRuntime(entries=registry.TOOLS, handlers=handlers, **runtime_kw)

    async def go():
        async with Client(build_server(runtime), mode="legacy") as client:
            return await client.call_tool(name, arguments)

    return anyio.run(go)


def envelope_valid(registry, result) -> None:
    assert result.is_error is True
    Draft202012Validator(registry.error_schema()).validate(result.structured_content)
    assert result.content[0].text == result.structured_content["message"]


HANDLERS = {"echo_text": echo_text, "echo_list": echo_list}


def test_success_text_is_compact_json_of_structured_content(mini_registry):
    result = call(mini_registry, HANDLERS, "echo_text", {"text": "hi", "limit": 2})
    assert result.is_error is False
    assert result.structured_content == {"text": "hi", "items": [{"text": "hi"}, {"text": "hi"}]}
    assert result.content[0].text == '{"text":"hi","items":[{"text":"hi"},{"text":"hi"}]}'


def test_schema_default_reaches_the_handler(mini_registry):
    result = call(mini_registry, HANDLERS, "echo_text", {"text": "x"})
    assert len(result.structured_content["items"]) == 3  # default limit 10, capped at 3 by the handler


def test_wrapped_array_is_the_whole_text_content(mini_registry):
    result = call(mini_registry, HANDLERS, "echo_list", {"text": "a"})
    assert result.structured_content == {"results": [{"text": "a", "kind": "a"}]}
    assert json.loads(result.content[0].text) == [{"text": "a", "kind": "a"}]


@pytest.mark.parametrize(
    ("arguments", "code", "field"),
    [
        ({"text": "hi", "limit": 51}, "resource_limit", "limit"),
        ({"text": "x" * 21}, "resource_limit", "text"),
        ({"text": "hi", "limit": 0}, "schema_validation", "limit"),
        ({"text": "hi", "limit": "5"}, "schema_validation", "limit"),
        ({"text": "hi", "unknown": 1}, "schema_validation", "arguments"),
        ({}, "schema_validation", "text"),
        ({"text": "hi", "day": "2026-13-01"}, "schema_validation", "day"),
    ],
)
def test_bad_arguments_get_the_contract_code(mini_registry, arguments, code, field):
    result = call(mini_registry, HANDLERS, "echo_text", arguments)
    envelope_valid(mini_registry, result)
    env = result.structured_content
    assert env["code"] == code
    assert [d["field"] for d in env["diagnostics"]] == [field]
    assert all(d["code"] == "invalid_input" for d in env["diagnostics"])


def test_diagnostics_never_echo_the_bad_value(mini_registry):
    secret = "s3cr3t-value-xyz"
    result = call(mini_registry, HANDLERS, "echo_text", {"text": secret * 3})
    assert secret not in json.dumps(result.structured_content)


def test_at_most_eight_input_diagnostics_sorted_by_field(mini_registry):
    arguments = {"text": "", "limit": 0, "day": "x", **{f"extra{i}": i for i in range(20)}}
    result = call(mini_registry, HANDLERS, "echo_text", arguments)
    fields = [d["field"] for d in result.structured_content["diagnostics"]]
    assert 1 <= len(fields) <= 8
    assert fields == sorted(fields)


def test_integral_float_counts_as_integer(mini_registry):
    result = call(mini_registry, HANDLERS, "echo_text", {"text": "hi", "limit": 2.0})
    assert result.is_error is False


def test_unimplemented_tool_answers_not_implemented(mini_registry):
    result = call(mini_registry, {"echo_text": echo_text, "echo_list": None}, "echo_list", {"text": "a"})
    envelope_valid(mini_registry, result)
    assert result.structured_content["code"] == "not_implemented"


def test_unknown_tool_is_a_protocol_error(mini_registry):
    runtime = ToolRuntime(entries=mini_registry.TOOLS, handlers=HANDLERS)

    async def go():
        async with Client(build_server(runtime), mode="legacy") as client:
            with pytest.raises(MCPError) as info:
                await client.call_tool("nope", {})
            return info.value

    assert anyio.run(go).error.code == -32602


def test_handler_crash_becomes_an_envelope_without_internals(mini_registry):
    def boom(args, ctx):
        raise RuntimeError("/srv/secret/path exploded")

    result = call(mini_registry, {**HANDLERS, "echo_text": boom}, "echo_text", {"text": "a"})
    envelope_valid(mini_registry, result)
    assert result.structured_content["code"] == "operation_rejected"
    assert "secret" not in json.dumps(result.structured_content)


def test_tool_error_message_with_a_path_is_redacted(mini_registry):
    def leaky(args, ctx):
        raise ToolError("invalid_request", "bundle_path is not accessible: open /home/ana/kb: denied")

    result = call(mini_registry, {**HANDLERS, "echo_text": leaky}, "echo_text", {"text": "a"})
    assert result.structured_content["message"] == "bundle_path is not accessible: open <path>: denied"
    assert "/home" not in result.content[0].text


def test_unsafe_code_is_coerced(mini_registry):
    def odd(args, ctx):
        raise ToolError("Bad-Code", "nope")

    result = call(mini_registry, {**HANDLERS, "echo_text": odd}, "echo_text", {"text": "a"})
    assert result.structured_content["code"] == "operation_rejected"


def test_output_that_breaks_its_schema_is_refused(mini_registry):
    def wrong(args, ctx):
        return ToolOutput({"text": 5, "items": []})

    result = call(mini_registry, {**HANDLERS, "echo_text": wrong}, "echo_text", {"text": "a"})
    envelope_valid(mini_registry, result)
    assert result.structured_content["code"] == "schema_validation"
    assert result.structured_content["message"] == "tool output does not match the advertised schema"


def test_output_over_a_schema_limit_is_resource_limit(mini_registry):
    def too_many(args, ctx):
        return ToolOutput({"text": "a", "items": [{"text": "a"}] * 51})

    result = call(mini_registry, {**HANDLERS, "echo_text": too_many}, "echo_text", {"text": "a"})
    assert result.structured_content["code"] == "resource_limit"


def test_handler_returning_nothing_is_schema_validation(mini_registry):
    result = call(mini_registry, {**HANDLERS, "echo_text": lambda a, c: None}, "echo_text", {"text": "a"})
    assert result.structured_content["message"] == "tool handler returned no result"


def test_deadline_cancels_the_handler_with_a_retryable_error(mini_registry):
    stopped = threading.Event()

    def slow(args, ctx):
        for _ in range(200):
            time.sleep(0.01)
            if ctx.cancel_event.is_set():
                stopped.set()
                ctx.check_cancelled("echo_text request")
        return ToolOutput({"text": "late", "items": []})

    from knowspec.impl.config import Settings

    settings = Settings(call_timeout_seconds=0.2)
    result = call(mini_registry, {**HANDLERS, "echo_text": slow}, "echo_text", {"text": "a"}, settings=settings)
    assert result.structured_content["code"] == "operation_cancelled"
    assert result.structured_content["retryable"] is True
    assert stopped.wait(2), "the worker thread saw the cancellation flag"


def test_tools_list_is_stable_and_carries_raw_schemas(mini_registry):
    runtime = ToolRuntime(entries=mini_registry.TOOLS, handlers=HANDLERS)
    first = [t.model_dump(mode="json", by_alias=True) for t in runtime.tool_list()]
    second = [t.model_dump(mode="json", by_alias=True) for t in ToolRuntime(entries=mini_registry.TOOLS, handlers=HANDLERS).tool_list()]
    assert json.dumps(first) == json.dumps(second)
    tool = first[0]
    assert tool["name"] == "echo_text"
    assert tool["inputSchema"] == mini_registry.load_schema("echo", "echo_text", "input")
    assert tool["outputSchema"]["anyOf"][1]["required"] == ["code", "message", "retryable", "diagnostics"]
    assert {k: v for k, v in tool["annotations"].items() if v is not None} == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def test_diagnostic_spec_ref_and_field_never_carry_a_path(mini_registry):
    from knowspec.impl.errors import diagnostic

    def leaky(args, ctx):
        raise ToolError("pool_unavailable", "database is not registered",
                        diagnostics=[diagnostic("pool_unavailable", "database is not registered",
                                                field="../../etc", spec_ref="/etc/passwd")])

    result = call(mini_registry, {**HANDLERS, "echo_text": leaky}, "echo_text", {"text": "a"})
    diag = result.structured_content["diagnostics"][0]
    assert diag["spec_ref"] == "" and diag["field"] == ""


def test_argument_paths_survive_in_field(mini_registry):
    from knowspec.impl.errors import diagnostic

    def pointed(args, ctx):
        raise ToolError("invalid_request", "bad", diagnostics=[
            diagnostic("invalid_request", "x", field="/params/database", spec_ref="seeds/001#import"),
            diagnostic("invalid_input", "y", field="kinds.0")])

    result = call(mini_registry, {**HANDLERS, "echo_text": pointed}, "echo_text", {"text": "a"})
    fields = [(d["field"], d["spec_ref"]) for d in result.structured_content["diagnostics"]]
    assert fields == [("/params/database", "seeds/001#import"), ("kinds.0", "")]


def test_every_handler_gets_the_servers_runtime_on_its_context(mini_registry):
    from knowspec.impl.runtime import Runtime

    mine, seen = Runtime(), []

    def spy(args, ctx):
        seen.append(ctx.runtime)
        return echo_text(args, ctx)

    call(mini_registry, {"echo_text": spy}, "echo_text", {"text": "x"}, process_runtime=mine)
    assert seen == [mine]


def _unwritten(impl: str):
    """list_concepts' registry entry pointed at an impl that does not exist."""
    import dataclasses

    from knowspec.generated.registry import TOOLS

    return dataclasses.replace(next(e for e in TOOLS if e.name == "list_concepts"), impl=impl)


@pytest.mark.parametrize("impl", ["knowspec.impl.okf.tools.read:count_concepts",
                                  "knowspec.impl.okf.tools.counting:count_concepts"],
                         ids=["function-missing", "module-missing"])
def test_a_tool_whose_impl_is_not_written_answers_not_implemented(impl, tmp_path, caplog):
    runtime = ToolRuntime(entries=(_unwritten(impl),))
    assert runtime.implemented() == {"list_concepts": False}

    async def go():
        async with Client(build_server(runtime), mode="legacy") as client:
            return await client.call_tool("list_concepts", {"bundle_path": str(tmp_path)})

    result = anyio.run(go)
    assert result.is_error and result.structured_content["code"] == "not_implemented"
    assert "list_concepts" in result.structured_content["message"]
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.levelname == "ERROR"]
    assert runtime.implemented() == {"list_concepts": False}  # after the call too


def test_a_missing_library_inside_a_written_module_is_not_taken_for_an_unwritten_tool(tmp_path, monkeypatch):
    from knowspec.impl.server.pipeline import resolve_handler

    module = tmp_path / "ks_needs_a_library.py"
    module.write_text("import ks_no_such_library\n\ndef handler(args, ctx):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="ks_no_such_library"):
        resolve_handler(_unwritten("ks_needs_a_library:handler"))


def test_the_status_of_written_tools_is_read_without_importing_them():
    import subprocess
    import sys

    code = ("import sys; from knowspec.impl.server.pipeline import ToolRuntime; s = ToolRuntime().implemented(); "
            "print(all(s.values()), len(s), 'knowspec.impl.docpool.tools' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "25", "False"]


def test_a_tools_list_cursor_is_refused_as_none_is_ever_issued(mini_registry):
    """A garbage cursor had the whole list back (MCP pagination: an invalid cursor is -32602)."""
    runtime = ToolRuntime(entries=mini_registry.TOOLS, handlers=HANDLERS)

    async def go():
        async with Client(build_server(runtime), mode="legacy") as client:
            listed = await client.list_tools()
            with pytest.raises(MCPError) as refused:
                await client.list_tools(cursor="garbage", cache_mode="refresh")
            return listed, refused.value

    listed, refused = anyio.run(go)
    assert len(listed.tools) == len(mini_registry.TOOLS) and listed.next_cursor is None
    assert refused.error.code == -32602 and "cursor" in refused.error.message

"""No handler exception escapes as a generic code: every failure is a contract ``ToolError``
(issue #19.7). The runtime re-raises unexpected exceptions here instead of answering
``operation_rejected``, so one escaping is a test failure with its traceback."""

from __future__ import annotations

import os

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from knowspec.conformance.contract import load_contract
from knowspec.conformance.generate import arguments
from knowspec.impl.config import Settings
from knowspec.impl.server.pipeline import ToolRuntime

CONTRACT = load_contract()
OKF_TOOLS = [t for t in CONTRACT.tools if "bundle_path" in t.input_properties]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundle")
    (root / "a.md").write_text("---\ntitle: A\n---\nSee [b](b.md).\n")
    (root / "b.md").write_text("---\ntitle: B\nrelations:\n  - type: uses\n    target: a\n---\nbody\n")
    (root / "bad.md").write_bytes(b"---\ntitle: [\n---\n\xff")
    (root / "sub").mkdir()
    (root / "sub" / "c.md").write_text("no frontmatter\n")
    return root


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    rt = ToolRuntime(Settings(appdir=tmp_path_factory.mktemp("appdir")))
    rt.raise_unexpected = True
    return rt


def hostile_paths(bundle) -> list[str]:
    return [str(bundle), str(bundle / "a.md"), str(bundle / "sub"), str(bundle) + "/", str(bundle) + "/../x",
            str(bundle) + "\x00x", "/tmp/a\x00b", "/proc", "/proc/1", f"/proc/{os.getpid()}", "/proc/self",
            "/sys/kernel", "/dev", "/nonexistent/kb", "relative/kb", " /tmp", "/tmp\ud800", "/" + "é" * 300]


def _check(runtime, tool, args) -> None:
    async def go():
        return await runtime.call(tool.name, args)

    result = anyio.run(go)  # an unexpected exception propagates here and fails the test
    payload = result.structured_content
    if result.is_error:
        Draft202012Validator(CONTRACT.error_schema).validate(payload)
        assert payload["code"] in CONTRACT.error_codes, payload
        generic = payload["code"] == "operation_rejected" and not payload["diagnostics"] \
            and payload["message"] == "tool operation was rejected"
        assert not generic, f"{tool.name} answered the generic code for an unexpected exception"
    else:
        Draft202012Validator(tool.success_schema).validate(payload)


@pytest.mark.parametrize("tool", OKF_TOOLS, ids=lambda t: t.name)
def test_okf_tools_answer_hostile_bundle_paths_with_contract_codes(tool, runtime, bundle):
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(args=arguments(tool, "positive"), path=st.sampled_from(hostile_paths(bundle)))
    def run(args, path):
        _check(runtime, tool, {**args, "bundle_path": path})

    run()


@pytest.mark.parametrize("tool", [t for t in CONTRACT.tools if t not in OKF_TOOLS], ids=lambda t: t.name)
def test_pool_tools_answer_generated_arguments_with_contract_codes(tool, runtime):
    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(args=arguments(tool, "positive"))
    def run(args):
        _check(runtime, tool, args)

    run()

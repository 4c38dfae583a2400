"""The suite reaches an HTTP server that requires a session: --bearer-token, its environment
default, and the admin login it falls back on."""

from __future__ import annotations

import argparse

from knowspec.conformance.cli import add_arguments, config_from_args
from knowspec.conformance.config import RunConfig
from knowspec.conformance.runner import mcp_credentials


def _parse(argv: list[str]) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(argv))


def test_bearer_token_comes_from_the_flag_or_the_environment(monkeypatch):
    assert _parse(["--target", "http://h/mcp", "--bearer-token", "t1"]).bearer_token == "t1"
    monkeypatch.setenv("KNOWSPEC_CONFORM_TOKEN", "t2")
    assert _parse(["--target", "http://h/mcp"]).bearer_token == "t2"


def test_a_given_token_or_a_stdio_target_needs_no_login():
    given = RunConfig(target="http://127.0.0.1:1/mcp", rest_url="http://127.0.0.1:1", admin_user="a",
                      admin_password="p", bearer_token="t")
    assert mcp_credentials(given) is given
    stdio = RunConfig(target="stdio:x", rest_url="http://127.0.0.1:1", admin_user="a", admin_password="p")
    assert mcp_credentials(stdio) is stdio


def test_a_refused_admin_login_leaves_the_run_anonymous():
    config = RunConfig(target="http://127.0.0.1:1/mcp", rest_url="http://127.0.0.1:1", admin_user="a",
                       admin_password="p", call_timeout=2)
    assert mcp_credentials(config).bearer_token is None

"""DNS-rebinding protection covers every route of a loopback server, not only /mcp: a foreign
Host is 421 and a foreign Origin 403, with the REST error envelope; on another bind the operator's
``--allowed-host`` / ``--allowed-origin`` names make the same check."""

from __future__ import annotations

import http.client
import json
import sys

import pytest
from jsonschema import Draft202012Validator

from knowspec.generated.registry import error_schema
from knowspec.impl.server.host_check import HostRule, host_rule, transport_security
from serving import free_port, serving


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    port = free_port()
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(tmp_path_factory.mktemp("appdir"))], port):
        yield port


def _request(port: int, method: str, path: str, headers: dict[str, str]) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"user": "nobody", "password": "wrong"}) if method == "POST" else None
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **headers})
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"{}")


@pytest.mark.parametrize(("method", "path"), [("POST", "/ClientREST/Login"), ("POST", "/ClientREST/DocSearch"),
                                              ("GET", "/healthz")])
def test_a_foreign_host_is_421_on_every_route(port, method, path):
    status, body = _request(port, method, path, {"Host": "evil.example"})
    assert status == 421
    Draft202012Validator(error_schema()).validate(body)
    assert body["code"] == "invalid_request"


def test_a_foreign_origin_is_403(port):
    status, body = _request(port, "POST", "/ClientREST/Login", {"Host": f"127.0.0.1:{port}",
                                                                 "Origin": "http://evil.example"})
    assert status == 403 and body["code"] == "forbidden"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_host_and_origin_are_served(port, host):
    status, body = _request(port, "POST", "/ClientREST/Login", {"Host": f"{host}:{port}",
                                                                 "Origin": f"http://{host}:{port}"})
    assert status == 401 and body["code"] == "unauthenticated"  # served: the password was wrong
    assert _request(port, "GET", "/healthz", {"Host": f"{host}:{port}"})[0] == 200


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_the_mcp_routes_refuse_a_foreign_host_first_with_a_jsonrpc_error(port, path):
    # before the token is asked for, and /mcp/ is no redirect that echoes the foreign host
    status, body = _request(port, "POST", path, {"Host": "evil.example"})
    assert status == 421 and body["error"]["message"] == "Invalid Host header" and body["id"] is None


@pytest.mark.parametrize(("headers", "status"), [
    ({"Host": "127.0.0.1:{port}@evil.example"}, 421),  # the SDK's 127.0.0.1:* matched this as a prefix
    ({"Host": "localhost.evil.example"}, 421),
    ({"Host": "127.0.0.1:{port}", "Origin": "http://127.0.0.1:80@evil.example"}, 403),
    ({"Host": "127.0.0.1:{port}", "Origin": "https://127.0.0.1:{port}"}, 403)])
def test_a_disguised_host_or_origin_is_refused(port, headers, status):
    sent = {k: v.format(port=port) for k, v in headers.items()}
    assert _request(port, "POST", "/ClientREST/Login", sent)[0] == status
    assert _request(port, "POST", "/mcp", sent)[0] == status


@pytest.mark.parametrize(("host", "enabled"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                               ("0.0.0.0", False), ("192.0.2.7", False)])
def test_without_names_the_check_is_on_for_loopback_binds_only(host, enabled):
    assert (host_rule(host) is not None) is enabled
    assert transport_security(host_rule(host)).enable_dns_rebinding_protection is enabled


KB = host_rule("0.0.0.0", ("KB.example.com", "192.0.2.7"))


@pytest.mark.parametrize(("host", "origin", "answer"), [
    ("kb.example.com", None, None), ("KB.EXAMPLE.COM:8443", "https://kb.example.com", None),
    ("192.0.2.7:80", "http://192.0.2.7:80", None),
    ("evil.example", None, 421), ("kb.example.com.evil.example", None, 421), (None, None, 421),
    ("kb.example.com:1@evil.example", None, 421),
    ("kb.example.com", "https://evil.example", 403), ("kb.example.com", "null", 403),
    ("kb.example.com", "ftp://kb.example.com", 403)])
def test_named_hosts_are_the_only_ones_a_wildcard_bind_answers(host, origin, answer):
    """A page whose domain was made to resolve to a LAN server reached it through a visitor's
    browser (a hostile review): every Host and Origin were served on any bind but loopback."""
    refused = KB.refusal(host, origin)
    assert (refused[0] if refused else None) == answer


def test_named_origins_replace_the_hosts_own():
    rule = host_rule("0.0.0.0", ("kb.example.com",), ("https://portal.example.com",))
    assert rule.refusal("kb.example.com", "https://portal.example.com") is None
    assert rule.refusal("kb.example.com", "https://kb.example.com") == (403, "Invalid Origin header")
    origins_only = host_rule("0.0.0.0", (), ("https://portal.example.com",))
    assert origins_only == HostRule((), ("https://portal.example.com",))
    assert origins_only.refusal("anything.example", None) is None  # Host left to the operator's proxy
    assert origins_only.refusal("anything.example", "http://evil.example") == (403, "Invalid Origin header")


def test_a_loopback_bind_keeps_its_names_beside_the_operators():
    rule = host_rule("127.0.0.1", ("kb.example.com",))
    assert rule.refusal("localhost:8765", "http://localhost:8765") is None
    assert rule.refusal("kb.example.com", "https://kb.example.com") is None
    assert rule.refusal("evil.example", None) == (421, "Invalid Host header")


@pytest.mark.parametrize("option", [["--allowed-host", "http://kb.example.com"],
                                    ["--allowed-host", "kb.example.com:80"],
                                    ["--allowed-origin", "kb.example.com"], ["--allowed-origin", "ftp://kb.example"]])
def test_a_malformed_name_is_a_usage_error(tmp_path, capsys, option):
    from knowspec.impl.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--http", "127.0.0.1:1", "--appdir", str(tmp_path), *option])
    assert exit_.value.code == 2 and option[0] in capsys.readouterr().err


@pytest.fixture(scope="module")
def lan_port(tmp_path_factory):
    port = free_port()
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"0.0.0.0:{port}",
                  "--allowed-host", "kb.example.com", "--allow-anonymous",
                  "--appdir", str(tmp_path_factory.mktemp("appdir"))], port):
        yield port


def test_a_wildcard_bind_with_a_named_host_refuses_others_on_every_route(lan_port):
    assert _request(lan_port, "GET", "/healthz", {"Host": "evil.example"})[0] == 421
    assert _request(lan_port, "POST", "/mcp", {"Host": "evil.example"})[0] == 421
    assert _request(lan_port, "POST", "/ClientREST/Login", {"Host": f"kb.example.com:{lan_port}",
                                                            "Origin": "http://evil.example"})[0] == 403
    assert _request(lan_port, "GET", "/healthz", {"Host": f"kb.example.com:{lan_port}"})[0] == 200


def test_an_mcp_client_of_a_named_host_is_served(lan_port):
    """The SDK's own check of /mcp gets the same names: an initialize through them is answered."""
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    conn = http.client.HTTPConnection("127.0.0.1", lan_port, timeout=30)
    conn.request("POST", "/mcp", body=json.dumps(initialize), headers={
        "Host": f"kb.example.com:{lan_port}", "Origin": f"https://kb.example.com:{lan_port}",
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
    answer = conn.getresponse()
    assert answer.status == 200 and answer.getheader("mcp-session-id"), answer.read()[:200]


def _initialize_answer(mini_registry, tmp_path, host: str, origin: str | None):
    """The status of an MCP initialize sent with ``host`` and ``origin`` ("{port}": the server's)."""
    from knowspec.impl.config import Settings
    from knowspec.impl.server.http_app import build_app
    from knowspec.impl.server.pipeline import ToolRuntime
    from serving import serving_app

    runtime = ToolRuntime(Settings(appdir=tmp_path, allow_anonymous=True), entries=mini_registry.TOOLS,
                          handlers={"echo_list": None, "echo_text": None})
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    with serving_app(build_app(runtime, host="127.0.0.1")) as served:
        headers = {"Host": host.format(port=served), "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json", **({"Origin": origin.format(port=served)} if origin else {})}
        conn = http.client.HTTPConnection("127.0.0.1", served, timeout=30)
        conn.request("POST", "/mcp", body=json.dumps(initialize), headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.getheader("mcp-session-id"), answer.read()[:200]


@pytest.mark.parametrize(("host", "origin"), [("LOCALHOST", None), ("LocalHost", "HTTP://LOCALHOST"),
                                              ("127.0.0.1", "Http://Localhost")])
def test_a_loopback_name_in_other_letter_case_reaches_mcp(mini_registry, tmp_path, host, origin):
    """Our check is case-blind, the SDK's of /mcp was not: curl http://LOCALHOST:PORT/mcp got its 421."""
    status, session, body = _initialize_answer(mini_registry, tmp_path, host + ":{port}",
                                               origin and origin + ":{port}")
    assert status == 200 and session, body


@pytest.mark.parametrize(("host", "origin"), [("127.0.0.1", None), ("localhost", "http://localhost"),
                                              ("[::1]", "http://[::1]")])
def test_a_loopback_host_without_a_port_reaches_mcp(mini_registry, tmp_path, host, origin):
    """REST served ``Host: 127.0.0.1`` (a port is optional in our check), /mcp answered the SDK's 421."""
    status, session, body = _initialize_answer(mini_registry, tmp_path, host, origin)
    assert status == 200 and session, body

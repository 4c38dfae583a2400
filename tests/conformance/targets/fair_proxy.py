"""A deliberately different but conformant server: a stdio proxy that changes only what the
contract leaves free, in front of a real server.

``python fair_proxy.py [--seed N] [--only-2025] -- <server argv...>``

- tools/list: every description and title reworded, ``examples``/``default``/``$comment``
  dropped, tools in another order, each output schema the success schema alone (no envelope
  alternative), ``$ref``s inlined where the seed says so;
- every message: JSON object keys in another (stable) order, strings encoded the way Go's
  encoding/json does (``<``, ``>``, ``&``, U+2028, U+2029 as ``\\u003c`` ...);
- ``--only-2025``: speaks protocol 2025-11-25 only: ``server/discover`` is an unknown method, no
  request but ``initialize`` is served before the handshake, ``initialize`` is answered for
  2025-11-25 whatever the client asks, and result fields newer
  than that revision (``ttlMs``, ``cacheScope``, ``resultType``) never reach the client.

The suite must judge this target exactly as the server behind it (0 failures). Test target only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import threading
from typing import Any

OLD_PROTOCOL = "2025-11-25"
NEWER_RESULT_FIELDS = ("ttlMs", "cacheScope", "resultType")
DROPPED = ("examples", "default", "$comment")


def go_json(message: Any) -> str:
    """One line as Go's encoding/json writes it (HTML-safe escapes; key order as given)."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def shuffled_keys(value: Any, seed: int) -> Any:
    """Object keys in another order, the same order for the same keys every time (a real server
    is free to choose its key order, not to change it between two answers to one call)."""
    if isinstance(value, dict):
        items = [(k, shuffled_keys(v, seed)) for k, v in value.items()]
        items.sort(key=lambda kv: hashlib.sha1(f"{seed}:{kv[0]}".encode()).digest())
        return dict(items)
    if isinstance(value, list):
        return [shuffled_keys(v, seed) for v in value]
    return value


def reworded(schema: Any) -> Any:
    """The same schema in other words: prose rewritten, annotations dropped."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key in DROPPED:
                continue
            if key in ("description", "title") and isinstance(value, str):
                out[key] = f"In other words: {value[::-1][:60]}"
            elif key == "properties" and isinstance(value, dict):
                out[key] = {name: reworded(sub) for name, sub in value.items()}
            else:
                out[key] = reworded(value)
        return out
    if isinstance(schema, list):
        return [reworded(v) for v in schema]
    return schema


def inline_refs(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 20:
            target = defs.get(ref[len("#/$defs/"):], {})
            rest = {k: v for k, v in node.items() if k != "$ref"}
            merged = {**inline_refs(target, defs, depth + 1), **inline_refs(rest, defs, depth)}
            return merged
        return {k: inline_refs(v, defs, depth) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [inline_refs(v, defs, depth) for v in node]
    return node


def success_only(output: Any) -> Any:
    """The success alternative of an ``anyOf[success, envelope]`` output schema, self-contained."""
    if not isinstance(output, dict) or not isinstance(output.get("anyOf"), list):
        return output
    def is_envelope(alt: Any) -> bool:
        return isinstance(alt, dict) and set(alt.get("required", ())) >= {"code", "message", "retryable"}
    success = next((a for a in output["anyOf"] if not is_envelope(a)), None)
    if success is None:
        return output
    root = {k: v for k, v in output.items() if k != "anyOf"}
    return {**root, **success}


class FairProxy:
    def __init__(self, argv: list[str], seed: int, only_2025: bool) -> None:
        self.seed, self.only_2025 = seed, only_2025
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr)
        self.methods: dict[Any, str] = {}
        self.lock = threading.Lock()
        self.initialized = False

    def to_client(self, message: Any) -> None:
        with self.lock:
            sys.stdout.write(go_json(shuffled_keys(message, self.seed)) + "\n")
            sys.stdout.flush()

    def to_server(self, message: Any) -> None:
        self.to_server_raw(json.dumps(message) + "\n")  # escaped ASCII: a lone surrogate travels as sent

    def to_server_raw(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8", "surrogateescape"))
        self.proc.stdin.flush()

    def client_loop(self) -> None:
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", "surrogateescape")
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):  # not JSON to us: the server behind answers it, as unproxied
                self.to_server_raw(line)
                continue
            if isinstance(message, dict) and "method" in message and "id" in message:
                self.methods[message["id"]] = message["method"]
                if self.only_2025 and message["method"] == "server/discover":
                    self.to_client({"jsonrpc": "2.0", "id": message["id"],
                                    "error": {"code": -32601, "message": "Method not found"}})
                    continue
                if self.only_2025 and not self.initialized and message["method"] != "initialize":
                    self.to_client({"jsonrpc": "2.0", "id": message["id"],
                                    "error": {"code": -32600, "message": "session not initialized"}})
                    continue
                if self.only_2025 and message["method"] == "initialize":
                    self.initialized = True
                    message = {**message, "params": {**message.get("params", {}), "protocolVersion": OLD_PROTOCOL}}
            self.to_server(message)
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def server_loop(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            method = self.methods.pop(message.get("id"), None) if isinstance(message, dict) else None
            result = message.get("result") if isinstance(message, dict) else None
            if isinstance(result, dict):
                if self.only_2025:
                    result = {k: v for k, v in result.items() if k not in NEWER_RESULT_FIELDS}
                    if method == "initialize":
                        result["protocolVersion"] = OLD_PROTOCOL
                if method == "tools/list":
                    result = self.tools_list(result)
                message = {**message, "result": result}
            self.to_client(message)

    def tools_list(self, result: dict[str, Any]) -> dict[str, Any]:
        tools = []
        for i, tool in enumerate(result.get("tools", [])):
            tool = dict(tool)
            tool["description"] = f"Our own words for {tool['name']}."
            if "title" in tool:
                tool["title"] = tool["name"].replace("_", " ").title()
            tool["inputSchema"] = reworded(tool.get("inputSchema"))
            output = success_only(tool.get("outputSchema"))
            if (self.seed + i) % 2 and isinstance(output, dict):
                output = inline_refs(output, output.get("$defs", {}))
            tool["outputSchema"] = reworded(output)
            tools.append(tool)
        tools.sort(key=lambda t: t["name"], reverse=self.seed % 2 == 0)
        return {**result, "tools": tools}

    def run(self) -> int:
        threading.Thread(target=self.client_loop, daemon=True).start()
        self.server_loop()
        return self.proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(prog="fair_proxy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only-2025", action="store_true")
    parser.add_argument("server", nargs=argparse.REMAINDER)
    ns = parser.parse_args()
    server = ns.server[1:] if ns.server[:1] == ["--"] else ns.server
    return FairProxy(server, ns.seed, ns.only_2025).run()


if __name__ == "__main__":
    sys.exit(main())

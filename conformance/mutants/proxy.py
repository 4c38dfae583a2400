"""A stdio MCP proxy that forwards JSON-RPC lines to a real server and applies one mutation.

``python -m knowspec.conformance.mutants.proxy --mutant NAME -- <server argv...>``. Requests are
remembered by id so a response can be mutated knowing which tool and arguments it answers.
``identity`` forwards unchanged (the baseline for kill rates). ``swap_concurrent_answers``
holds a tools/call answer briefly and swaps it with the next one (breaks concurrent calls).
A client mutant (``CLIENT_MUTANTS``) edits what the client sends instead, e.g. its cancels.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from typing import Any, IO

from knowspec.conformance.mutants.catalogue import CLIENT_MUTANTS, MUTANTS

PAIRING = "swap_concurrent_answers"
SPECIAL = ("identity", PAIRING)


class Proxy:
    def __init__(self, mutant: str, argv: list[str]) -> None:
        self.mutate = MUTANTS[mutant].mutate if mutant in MUTANTS else None
        self.client_edit = CLIENT_MUTANTS[mutant].edit if mutant in CLIENT_MUTANTS else None
        self.pairing = mutant == PAIRING
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr)
        self.requests: dict[Any, dict] = {}
        self.state: dict = {}
        self.out_lock = threading.Lock()
        self.held: tuple[dict, threading.Timer] | None = None
        self.held_lock = threading.Lock()

    def write_client(self, message: dict) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self.out_lock:
            sys.stdout.write(data)
            sys.stdout.flush()

    def client_to_server(self, stream: IO[str]) -> None:
        assert self.proc.stdin is not None
        for line in stream:
            lines = [line]
            try:
                message = json.loads(line)
                if isinstance(message, dict) and "method" in message and "id" in message:
                    self.requests[message["id"]] = message
                if isinstance(message, dict) and self.client_edit is not None:
                    forward, answers = self.client_edit(message, self.requests, self.state)
                    for answer in answers:
                        self.write_client(answer)
                    lines = [json.dumps(m, ensure_ascii=False, separators=(",", ":")) + "\n" for m in forward]
            except ValueError:
                pass
            for out in lines:
                self.proc.stdin.write(out.encode())
            self.proc.stdin.flush()
        self.proc.stdin.close()

    def server_to_client(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                with self.out_lock:
                    sys.stdout.write(raw.decode(errors="replace"))
                    sys.stdout.flush()
                continue
            request = self.requests.pop(message.get("id"), None) if isinstance(message, dict) else None
            if request is None:
                self.write_client(message)
            elif self.pairing and request.get("method") == "tools/call" and "result" in message:
                self.pair(message)
            elif self.mutate is not None:
                self.write_client(self.mutate(request, message, self.state))
            else:
                self.write_client(message)
        self.flush_held()

    def pair(self, message: dict) -> None:
        with self.held_lock:
            if self.held is None:
                timer = threading.Timer(0.05, self.flush_held)
                self.held = (message, timer)
                timer.start()
                return
            first, timer = self.held
            self.held = None
            timer.cancel()
        first_result, second_result = first["result"], message["result"]
        self.write_client({**first, "result": second_result})
        self.write_client({**message, "result": first_result})

    def flush_held(self) -> None:
        with self.held_lock:
            held, self.held = self.held, None
        if held is not None:
            self.write_client(held[0])

    def run(self) -> int:
        reader = threading.Thread(target=self.client_to_server, args=(sys.stdin,), daemon=True)
        reader.start()
        self.server_to_client()
        return self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="knowspec-mutant-proxy")
    parser.add_argument("--mutant", required=True, choices=sorted([*MUTANTS, *CLIENT_MUTANTS, *SPECIAL]))
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- then the real server's argv")
    ns = parser.parse_args(argv)
    server = ns.server[1:] if ns.server[:1] == ["--"] else ns.server
    if not server:
        parser.error("give the real server command after --")
    return Proxy(ns.mutant, server).run()


if __name__ == "__main__":
    sys.exit(main())

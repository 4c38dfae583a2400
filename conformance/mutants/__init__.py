"""Mutant catalogue: wire-level proxies that break exactly one contract rule of a real server.

A mutant runs as ``python -m knowspec.conformance.mutants.proxy --mutant NAME -- <server argv>``:
a stdio MCP proxy that forwards JSON-RPC lines to the real server and corrupts one thing on
the way back. No server code is imported; any stdio MCP server can be mutated.
"""

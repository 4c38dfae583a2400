"""Conformance suite: checks any MCP server against spec/ over the wire (installed as knowspec.conformance)."""

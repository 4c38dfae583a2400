"""The MCP server, the call pipeline and the HTTP app."""

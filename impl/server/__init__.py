"""The MCP server, the call pipeline and the HTTP app."""

from knowspec.impl.server.sdk_imports import defer_package_inits

defer_package_inits()  # before any module of this package imports the SDK

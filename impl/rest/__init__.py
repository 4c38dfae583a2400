"""REST surface beside ``/mcp``: login sessions, Help*/Doc* mirrors of the tools, admin commands."""

"""One settings object for the whole server, built from CLI options and environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _default_appdir() -> Path:
    return Path(os.environ.get("KNOWSPEC_APPDIR", ".knowspec")).absolute()


def default_concurrent_calls() -> int:
    """Tool handlers run at once over HTTP (server/call_turns.py): twice the cores, at least 4."""
    return max(4, 2 * (os.cpu_count() or 2))


@dataclass
class Settings:
    """Where the server finds its state.

    ``appdir`` is the seed's ``${APPDIR}``: the help pool ``help.db`` (the seed's ``docs/help``
    setting) and its model pack ``models/e5-int8/`` live there by default, and so does the
    catalog (the seed's MASTER database) unless configured elsewhere.
    """

    appdir: Path = field(default_factory=_default_appdir)
    help_db: Path | None = None          # default: appdir / "help.db"
    catalog_db: Path | None = None       # default: appdir / "catalog.db"
    catalog_url: str | None = None       # a postgresql:// URL: the catalog lives there, not in a file
    default_database: str | None = None  # the seed's -DATABASE: used when a doc_* call names none
    agent_version: str = "5.1.1.1531"    # its third field is the <v3> fallback of help URLs
    session_ttl_seconds: int = 12 * 3600   # a session's absolute life after login
    session_idle_seconds: int = 30 * 60    # ... and how long it survives unused
    # Over HTTP: OKF bundles are served only under these folders (none listed: OKF tools refuse),
    # and an MCP caller without a session is refused with 401 unless allow_anonymous (then it
    # may read, never write). stdio is the local user and is never restricted.
    bundle_roots: tuple[Path, ...] = ()
    allow_anonymous: bool = False
    # Host names and browser origins an HTTP server answers besides a loopback bind's own
    # (server/host_check.py); none on another bind: every Host.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    import_dir: Path | None = None         # IMPORTDOC sources over REST; default: appdir / "imports"
    call_timeout_seconds: float = 120.0
    mcp_sessions_per_caller: int = 100   # open MCP sessions a user (or an anonymous address) may hold
    rest_sessions_per_user: int = 100    # live logins of one user; the next ends its least recently used
    requests_per_caller: int = 32        # HTTP requests one caller may have in flight (server/caller_load.py)
    calls_per_caller: int = 20           # MCP tool calls one caller may have in flight
    concurrent_calls: int = field(default_factory=default_concurrent_calls)  # handlers run at once over HTTP
    request_body_mib_in_flight: int = 128  # big request bodies held at once across all callers (one 65 MiB call and room)
    # Peers trusted to name the client in X-Forwarded-For (uvicorn's syntax: "10.0.0.1,10.0.0.2",
    # "*"); none by default, so no caller can name an address it does not have.
    forwarded_allow_ips: str = ""
    # Connections one HTTP server process keeps open (None: 4096, never into the descriptors it
    # needs for its files), and from one client address (server/connection_limits.py).
    max_connections: int | None = None
    connections_per_address: int = 512
    # serverInfo in the initialize answer. knowspec names itself by default; an operator whose
    # clients check okf-mcp's identity may say "okf-mcp" / "0.2.0" (spec/okf/NOTES.md#identity).
    server_name: str = "knowspec"
    server_version: str = ""             # "": the installed knowspec version

    @property
    def help_db_path(self) -> Path:
        return self.help_db or self.appdir / "help.db"

    @property
    def catalog_path(self) -> Path:
        """The SQLite catalog file (unused when ``catalog_url`` names a PostgreSQL catalog)."""
        return self.catalog_db or self.appdir / "catalog.db"

    @property
    def catalog(self) -> Path | str:
        """Where the catalog lives: its PostgreSQL URL when one is set, else its SQLite file."""
        return self.catalog_url or self.catalog_path

    @property
    def import_path(self) -> Path:
        return self.import_dir or self.appdir / "imports"

    @property
    def model_dir(self) -> Path:
        """The pool's model pack lives next to the help pool."""
        return self.help_db_path.parent / "models" / "e5-int8"

    def in_appdir(self, path: Path | str) -> Path:
        """Where a file named on the command line lives: a bare file name (``help.db``) is a file
        in ``appdir``, so one command's output is the next one's input; a path with a folder part
        is taken as given (from the current folder)."""
        path = Path(path)
        if path.is_absolute() or path.parent != Path("."):
            return path.absolute()
        return self.appdir / path

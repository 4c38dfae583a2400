"""One side of a contract comparison: a spec folder, a generated folder or a git revision.

Every form is read into the same ``ContractView`` (tools, error codes, REST endpoints, pool
DDL, revision) so the diff engine never cares where a side came from. A git revision is read
with ``git archive`` into a temporary folder; nothing in the work tree changes.
"""

from __future__ import annotations

import io
import json
import posixpath
import subprocess
import tarfile
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

POOL_DDL = Path("docpool") / "sql" / "sqlite_schema.sql"
GENERATED_DDL = Path("docpool") / "sqlite_schema.sql"


class SideError(Exception):
    """A side cannot be read (missing folder, unknown revision, broken spec): exit code 2."""


@dataclass
class ContractView:
    label: str
    revision: dict[str, Any]
    tools: dict[str, dict[str, Any]]
    error_codes: dict[str, dict[str, Any]]
    endpoints: dict[str, dict[str, Any]] = field(default_factory=dict)   # "POST /path" -> row
    ddl: str = ""

    @property
    def number(self) -> int:
        """The contract revision number (0 for revisions made before numbering began)."""
        return int(self.revision.get("contract-revision", 0) or 0)


def from_spec_dir(spec_dir: Path, label: str | None = None) -> ContractView:
    from knowspec.codegen.load import load_spec
    from knowspec.codegen.openapi import rest_endpoint_table
    from knowspec.codegen.render import contract_document

    if not (spec_dir / "REVISION.toml").is_file():
        raise SideError(f"{label or spec_dir}: not a spec folder (no REVISION.toml)")
    spec = load_spec(spec_dir)
    if spec.fatal():
        raise SideError(f"{label or spec_dir}: spec problems: " + "; ".join(str(p) for p in spec.fatal()[:3]))
    contract = contract_document(spec, [])
    ddl = spec_dir / POOL_DDL
    return _view(label or str(spec_dir), contract, rest_endpoint_table(spec),
                 ddl.read_text("utf-8") if ddl.is_file() else "")


def from_generated_dir(out_dir: Path, label: str | None = None) -> ContractView | None:
    """The contract a generated/ folder was made from, or None when it holds none yet."""
    contract_file = out_dir / "contract.json"
    if not contract_file.is_file():
        return None
    rest = out_dir / "rest_endpoints.json"
    ddl = out_dir / GENERATED_DDL
    return _view(label or str(out_dir), json.loads(contract_file.read_text("utf-8")),
                 json.loads(rest.read_text("utf-8")) if rest.is_file() else {"endpoints": []},
                 ddl.read_text("utf-8") if ddl.is_file() else "")


def _view(label: str, contract: dict[str, Any], rest: dict[str, Any], ddl: str) -> ContractView:
    return ContractView(
        label=label,
        revision=contract.get("revision", {}),
        tools={t["name"]: t for t in contract.get("tools", [])},
        error_codes=contract.get("error_codes", {}),
        endpoints={f"{e['method']} {e['path']}": e for e in rest.get("endpoints", [])},
        ddl=ddl,
    )


@contextmanager
def side(text: str, repo: Path | None = None) -> Iterator[ContractView]:
    """``git:REV`` (a revision of the repository holding the current folder) or a spec folder."""
    if text.startswith("git:"):
        with _revision_tree(text[4:], repo or Path.cwd()) as spec_dir:
            yield from_spec_dir(spec_dir, label=text)
        return
    path = Path(text)
    if not path.is_dir():
        raise SideError(f"{text}: no such spec folder (give a folder or git:REV)")
    yield from_spec_dir(path, label=text)


@contextmanager
def _revision_tree(rev: str, repo: Path) -> Iterator[Path]:
    try:
        top = _git(repo, "rev-parse", "--show-toplevel").decode().strip()
    except FileNotFoundError:
        raise SideError("git:REV needs git on PATH") from None
    except subprocess.CalledProcessError:
        raise SideError(f"git:{rev}: the current folder is not inside a git checkout (git:REV reads the one you run it in)") from None
    try:
        paths = ["spec", *_link_targets(top, rev)]
        archive = _git(Path(top), "archive", "--format=tar", rev, "--", *paths)
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or "").strip().splitlines()
        raise SideError(f"git:{rev}: {detail[-1] if detail else 'not readable'}") from None
    with tempfile.TemporaryDirectory(prefix="knowspec-spec-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp) / "spec"


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def _link_targets(top: str, rev: str) -> list[str]:
    """Repository paths that symlinks under spec/ point at (older revisions linked the pool DDL from spec/docpool/sql)."""
    targets = []
    for line in _git(Path(top), "ls-tree", "-r", rev, "--", "spec").decode().splitlines():
        mode, _, _, path = line.split(None, 3)
        if mode == "120000":
            link = _git(Path(top), "show", f"{rev}:{path}").decode().strip()
            targets.append(posixpath.normpath(posixpath.join(posixpath.dirname(path), link)))
    return targets

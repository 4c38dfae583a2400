"""What the suite expects of a server, read from ``generated/contract.json``.

The contract is data produced by ``knowspec codegen``; the suite never reads ``spec/`` or
imports the server. ``load_contract`` accepts an explicit file (``--contract``) so the suite
can check any server against any contract revision.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

LIMIT_KEYWORDS = frozenset({"maximum", "maxLength", "maxItems", "maxProperties"})


class ContractError(Exception):
    """The contract file is missing or malformed (a misconfiguration: exit code 2)."""


@dataclass(frozen=True)
class ToolContract:
    name: str
    family: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    success_schema: dict[str, Any]
    errors: tuple[str, ...]
    text_fallback: str = "json"
    text_encoder: str = "plain"     # "go": json text fallbacks are Go encoding/json bytes
    wrap: str = ""
    read_only: bool = True
    idempotent: bool = True
    title: str = ""
    description: str = ""
    limits: dict[str, dict[str, Any]] = field(default_factory=dict)
    ordering: dict[str, str] = field(default_factory=dict)
    rechecks: tuple[dict[str, str], ...] = ()

    @property
    def input_properties(self) -> dict[str, Any]:
        return self.input_schema.get("properties", {})

    @property
    def required_inputs(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required", ()))


@dataclass(frozen=True)
class Contract:
    tools: tuple[ToolContract, ...]
    error_codes: dict[str, dict[str, Any]]
    error_schema: dict[str, Any]
    revision: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def number(self) -> int:
        """The contract revision (0 for contracts made before numbering began)."""
        return int(self.revision.get("contract-revision", 0) or 0)

    def tool(self, name: str) -> ToolContract:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(name)

    def for_family(self, family: str) -> "Contract":
        """The same contract narrowed to one family (``all`` keeps every tool)."""
        if family == "all":
            return self
        kept = tuple(t for t in self.tools if t.family == family)
        return Contract(kept, self.error_codes, self.error_schema, self.revision, self.source)

    def only(self, names: tuple[str, ...]) -> "Contract":
        """The contract narrowed to the named tools (empty: unchanged); unknown names are an error."""
        if not names:
            return self
        unknown = sorted(set(names) - {t.name for t in self.tools})
        if unknown:
            raise ContractError(f"tool(s) not in the contract: {', '.join(unknown)}")
        kept = tuple(t for t in self.tools if t.name in names)
        return Contract(kept, self.error_codes, self.error_schema, self.revision, self.source)

    def retryable(self, code: str) -> bool | None:
        entry = self.error_codes.get(code)
        return None if entry is None else bool(entry.get("retryable", False))


def _tool_from_dict(raw: dict[str, Any]) -> ToolContract:
    try:
        return ToolContract(
            name=raw["name"],
            family=raw.get("family", ""),
            input_schema=raw["input_schema"],
            output_schema=raw["output_schema"],
            success_schema=raw.get("success_schema") or raw["output_schema"],
            errors=tuple(raw.get("errors", ())),
            text_fallback=raw.get("text_fallback", "json"),
            text_encoder=raw.get("text_encoder", "plain"),
            wrap=raw.get("wrap", "") or "",
            read_only=bool(raw.get("read_only", True)),
            idempotent=bool(raw.get("idempotent", True)),
            title=raw.get("title", ""),
            description=raw.get("description", ""),
            limits=dict(raw.get("limits", {})),
            ordering=dict(raw.get("ordering", {})),
            rechecks=tuple(raw.get("rechecks", ())),
        )
    except KeyError as exc:
        raise ContractError(f"tool entry {raw.get('name', '?')!r} lacks {exc}") from exc


def parse_contract(data: dict[str, Any], source: str = "") -> Contract:
    if data.get("knowspec_contract") != 1:
        raise ContractError(f"{source or 'contract'}: not a knowspec contract (knowspec_contract != 1)")
    tools = tuple(_tool_from_dict(t) for t in data.get("tools", ()))
    return Contract(
        tools=tools,
        error_codes=dict(data.get("error_codes", {})),
        error_schema=dict(data.get("error_schema", {})),
        revision=dict(data.get("revision", {})),
        source=source,
    )


def load_contract(path: str | Path | None = None) -> Contract:
    """Load ``path``, ``git:REV`` (that revision's generated/contract.json in the repository of the
    current folder) or, when ``None``, the packaged ``knowspec.generated/contract.json``."""
    contract = _load(path)
    number = contract.revision.get("contract-revision")
    if number is not None and (type(number) is not int or number < 0):
        raise ContractError(f"{contract.source}: contract-revision {number!r} is not a whole number "
                            "(spec/REVISION.toml numbers the contract)")
    return contract if number is None else replace(contract, source=f"{contract.source} (contract revision {number})")


def _load(path: str | Path | None) -> Contract:
    if isinstance(path, str) and path.startswith("git:"):
        text = _contract_at(path[4:])
        source = f"{path}:generated/contract.json"
    elif path is not None:
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ContractError(f"cannot read contract {file}: {exc.strerror}") from exc
        source = str(file)
    else:
        try:
            res = resources.files("knowspec.generated") / "contract.json"
            text = res.read_text(encoding="utf-8")
        except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
            raise ContractError(
                "knowspec.generated/contract.json not found; run `knowspec codegen` or pass --contract"
            ) from exc
        source = "knowspec.generated/contract.json"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(f"{source}: invalid JSON ({exc.msg} at line {exc.lineno})") from exc
    return parse_contract(data, source)


def _contract_at(rev: str) -> str:
    """The contract a revision of this repository generated, read with ``git show`` (nothing checked out)."""
    try:
        done = subprocess.run(["git", "show", f"{rev}:generated/contract.json"], capture_output=True, text=True)
    except FileNotFoundError:
        raise ContractError("--contract git:REV needs git on PATH") from None
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["not readable"])[-1]
        raise ContractError(f"git:{rev}: {detail} (run inside a knowspec checkout)")
    return done.stdout

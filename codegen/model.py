"""The intermediate model between spec files and templates: templates never see raw TOML."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Problem:
    """A spec defect found while loading; any ERROR stops code generation."""

    level: str  # "ERROR" | "WARN"
    file: str
    pointer: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}{'#' + self.pointer if self.pointer else ''}"
        return f"{self.level}: {where}: {self.message}"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    family: str
    title: str
    description: str
    impl: str
    read_only: bool
    idempotent: bool
    input_file: str            # spec-relative path of the input schema
    output_file: str           # spec-relative path of the success output schema
    input_schema: dict[str, Any]     # self-contained (external $refs inlined)
    success_schema: dict[str, Any]   # self-contained success output schema
    text_fallback: str               # "json" | "custom"
    text_fallback_doc: str
    text_encoder: str                # "go" (encoding/json bytes) | "plain" (compact JSON, UTF-8 kept)
    wrap: str
    errors: tuple[str, ...]
    limits: dict[str, Any]
    ordering: dict[str, str]
    rechecks: tuple[dict[str, str], ...] = ()   # handler-level refusals of schema-valid input

    @property
    def class_stem(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def annotations(self) -> dict[str, bool]:
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": not self.read_only,
            "idempotentHint": self.idempotent,
            "openWorldHint": False,
        }


@dataclass(frozen=True)
class FamilySpec:
    name: str
    order: int
    folder: str                # spec-relative folder, e.g. "okf"
    tools: tuple[ToolSpec, ...]


@dataclass(frozen=True)
class EndpointSpec:
    method: str
    path: str
    operation_id: str
    summary: str
    auth: str                  # "none" | "session" | "sysadmin"
    tag: str
    tool: str | None           # the tool whose handler answers (Help*/Doc* mirrors)
    request: dict[str, Any] | None      # self-contained, `omit` properties already removed
    response: dict[str, Any] | None     # 200 body
    accepted: dict[str, Any] | None     # 202 body
    errors: tuple[int, ...]             # statuses answered with the error envelope
    omit: tuple[str, ...] = ()          # tool input properties taken from the session, not the body


@dataclass
class SpecModel:
    revision: dict[str, Any]
    error_codes: dict[str, Any]
    error_schema: dict[str, Any]
    families: list[FamilySpec] = field(default_factory=list)
    endpoints: list[EndpointSpec] = field(default_factory=list)
    api: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def tools(self) -> list[ToolSpec]:
        return [t for fam in sorted(self.families, key=lambda f: f.order) for t in fam.tools]

    def fatal(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "ERROR"]

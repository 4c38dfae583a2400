"""Run datamodel-code-generator over each family's schemas: pinned version, flags in one list.

Root models get deterministic names (``<Tool>Input`` / ``<Tool>Output``) by stamping the root
``title`` on a temporary copy of the schemas, so the registry can name them without guessing.

The copy also drops ``format`` and ``pattern``: the server enforces both with JSON Schema before
a model is built, and keeping them would turn ``as_of`` into a ``datetime.date`` (handlers work on
the string the client sent) and hand ECMA regexes to pydantic's Rust regex engine. Likewise
presence-only ``anyOf`` branches ("slug, or kind and key") are dropped: they would turn the input
model into a union root model, and the server has already enforced them.

``--strict-nullable`` keeps an argument with a default non-optional (``limit: int = 20``): the
schema refuses ``null`` for it, so a handler never sees ``None`` there and need not re-check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from knowspec.codegen.model import SpecModel

PINNED_MAJOR_MINOR = "0.89"

FLAGS = [
    "--input-file-type", "jsonschema",
    "--output-model-type", "pydantic_v2.BaseModel",
    "--target-python-version", "3.11",
    "--disable-timestamp",
    "--field-constraints",
    "--use-annotated",
    "--use-title-as-name",
    "--enum-field-as-literal", "all",
    "--collapse-root-models",
    "--use-standard-collections",
    "--use-union-operator",
    "--strict-nullable",
    "--use-double-quotes",
    "--use-schema-description",
    "--formatters", "builtin",
]


class ModelGenerationError(RuntimeError):
    pass


def check_generator_version() -> str:
    import datamodel_code_generator

    version = getattr(datamodel_code_generator, "__version__", "") or _dist_version()
    if not version.startswith(PINNED_MAJOR_MINOR + "."):
        raise ModelGenerationError(
            f"datamodel-code-generator {PINNED_MAJOR_MINOR}.* is required for byte-stable output, found {version}"
        )
    return version


def _dist_version() -> str:
    from importlib.metadata import version

    return version("datamodel-code-generator")


def generate_models(spec: SpecModel, spec_dir: Path) -> dict[str, str]:
    """Return ``{"models/<family>/<module>.py": source}`` for every family (plus ``common``)."""
    check_generator_version()
    files: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="knowspec-codegen-") as tmp:
        tmp_path = Path(tmp)
        for family in spec.families:
            src = tmp_path / family.name / "schemas"
            _prepare_copy(spec_dir / family.folder / "schemas", src)
            for tool in family.tools:
                _stamp_title(src / Path(tool.input_file).name, f"{tool.class_stem}Input")
                _stamp_title(src / Path(tool.output_file).name, f"{tool.class_stem}Output")
            files.update(_run(src, tmp_path / family.name / "out", f"models/{family.name}"))
        common = tmp_path / "common" / "schemas"
        _prepare_copy(spec_dir / "common", common)
        files.update(_run(common, tmp_path / "common" / "out", "models/common"))
    files["models/__init__.py"] = '"""Pydantic v2 models generated from spec/ by datamodel-code-generator."""\n'
    return files


def _stamp_title(path: Path, title: str) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["title"] = title
    path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _presence_only(value: Any) -> bool:
    """``anyOf: [{required: [a]}, {required: [b]}]``: which arguments must be present, nothing else."""
    return isinstance(value, list) and all(isinstance(b, dict) and set(b) <= {"required"} for b in value)


def _strip_checked_keywords(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_checked_keywords(v) for k, v in node.items()
                if not (k in ("format", "pattern") and isinstance(v, str))
                and not (k in ("anyOf", "oneOf") and _presence_only(v))}
    if isinstance(node, list):
        return [_strip_checked_keywords(v) for v in node]
    return node


def _prepare_copy(src: Path, dst: Path) -> None:
    for path in sorted(src.rglob("*.json")):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        schema = _strip_checked_keywords(json.loads(path.read_text(encoding="utf-8")))
        target.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _run(src: Path, out: Path, prefix: str) -> dict[str, str]:
    cmd = [sys.executable, "-m", "datamodel_code_generator", "--input", str(src), "--output", str(out), *FLAGS]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=src.parent)
    if proc.returncode != 0:
        raise ModelGenerationError(f"datamodel-codegen failed for {prefix}:\n{proc.stderr[-4000:]}")
    files = {}
    if out.is_file():  # a single schema produces one module instead of a package
        files[f"{prefix}/__init__.py"] = out.read_text(encoding="utf-8")
        return files
    for path in sorted(out.rglob("*.py")):
        files[f"{prefix}/{path.relative_to(out).as_posix()}"] = path.read_text(encoding="utf-8")
    return files


def find_class_module(files: dict[str, str], prefix: str, class_name: str) -> str | None:
    """The dotted module (relative to ``knowspec.generated``) that defines ``class_name``."""
    needle = f"\nclass {class_name}("
    for rel, text in sorted(files.items()):
        if rel.startswith(prefix + "/") and needle in text:
            return rel[: -len(".py")].replace("/", ".").removesuffix(".__init__")
    return None

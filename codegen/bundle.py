"""Make a schema self-contained: inline every cross-file ``$ref`` into ``$defs``.

MCP clients receive ``inputSchema``/``outputSchema`` as plain JSON and cannot fetch our other
spec files, so every advertised schema must resolve on its own. A ref
``"common.schema.json#/$defs/Version"`` becomes ``"#/$defs/Version"`` with the definition copied
in (recursively, so refs inside copied definitions are rewritten too).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any


class BundleError(ValueError):
    pass


def _load(path: Path, cache: dict[Path, dict[str, Any]]) -> dict[str, Any]:
    if path not in cache:
        cache[path] = json.loads(path.read_text(encoding="utf-8"))
    return cache[path]


def _pointer_get(doc: Any, pointer: str) -> Any:
    node = doc
    for raw in [p for p in pointer.split("/") if p]:
        key = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def bundle_schema(path: Path) -> dict[str, Any]:
    """Load ``path`` and return a copy in which every ref points inside the document."""
    cache: dict[Path, dict[str, Any]] = {}
    root = copy.deepcopy(_load(path.resolve(), cache))
    defs: dict[str, Any] = root.setdefault("$defs", {})
    origin: dict[str, tuple[Path, str]] = {name: (path.resolve(), f"/$defs/{name}") for name in defs}

    def rewrite(node: Any, base: Path) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    out[key] = resolve_ref(value, base)
                elif key == "$id" and node is not root:
                    continue  # nested $id would change the resolution base of copied defs
                else:
                    out[key] = rewrite(value, base)
            return out
        if isinstance(node, list):
            return [rewrite(v, base) for v in node]
        return node

    def resolve_ref(ref: str, base: Path) -> str:
        file_part, _, fragment = ref.partition("#")
        target = (base.parent / file_part).resolve() if file_part else base
        if target == path.resolve() and file_part == "":
            return ref
        if not fragment.startswith("/$defs/") or fragment.count("/") != 2:
            raise BundleError(f"{ref}: only refs to top-level $defs of another file can be bundled")
        name = fragment.split("/")[2]
        known = origin.get(name)
        if known is None:
            origin[name] = (target, fragment)
            source = _pointer_get(_load(target, cache), fragment)
            defs[name] = rewrite(copy.deepcopy(source), target)
        elif known != (target, fragment):
            raise BundleError(f"{ref}: definition name {name!r} already taken by {known[0].name}")
        return f"#/$defs/{name}"

    result = rewrite(root, path.resolve())
    result["$defs"] = {k: defs[k] for k in sorted(defs)}
    if not result["$defs"]:
        del result["$defs"]
    return result


def advertised_output_schema(success: dict[str, Any], envelope: dict[str, Any]) -> dict[str, Any]:
    """``{"type": "object", "anyOf": [success, envelope]}``, self-contained.

    Both branches keep their own ``$defs`` merged at the root so that ``#/$defs/...`` refs inside
    either branch resolve against the advertised document.
    """
    success = copy.deepcopy(success)
    envelope = copy.deepcopy(envelope)
    defs: dict[str, Any] = {}
    for part in (success, envelope):
        for name, value in part.pop("$defs", {}).items():
            if name in defs and defs[name] != value:
                raise BundleError(f"$defs name {name!r} differs between success and error schemas")
            defs[name] = value
    for part in (success, envelope):
        part.pop("$schema", None)
        part.pop("$id", None)
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "anyOf": [success, envelope],
    }
    if defs:
        schema["$defs"] = {k: defs[k] for k in sorted(defs)}
    return schema

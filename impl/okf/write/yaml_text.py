"""YAML text facts the lossless editor relies on, and a tiny block emitter for new values.

Frontmatter is composed (not constructed) with ruamel.yaml in YAML 1.2 mode so that every
node keeps its source position, raw scalar text, tag and style. The edits splice source lines
and leave comments where they are, so the composer skips comments (ruamel's safe pipeline:
the same nodes as its round-trip one, a fifth less time). Documents the editor cannot
change provably losslessly (anchors and aliases, merge keys, duplicate keys, a non-mapping or
flow root) are refused here, before any edit is planned.
"""

from __future__ import annotations

import functools
import io
import json
import threading
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from knowspec.impl.okf.write.block_composer import compose_block_subset

MAX_DEPTH = 64
MAX_NODES = 100_000


class YamlRejected(Exception):
    """The frontmatter cannot be edited without risking a silent semantic change."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_local = threading.local()


def _yaml() -> YAML:
    """One composing YAML 1.2 instance per thread (instances are not thread-safe)."""
    y = getattr(_local, "yaml", None)
    if y is None:
        y = YAML(typ="safe", pure=True)
        y.version = (1, 2)
        _local.yaml = y
    return y


def _composed(text: str) -> Node | None:
    """ruamel's root node of ``text``: built directly when the text is of the plain block shape
    (``block_composer``), else by ruamel's composer."""
    root = compose_block_subset(text)
    return root if root is not None else _yaml().compose(io.StringIO(text))


def compose(text: str) -> MappingNode | None:
    """The root mapping node of ``text`` (None when blank), after the fail-closed checks."""
    if text.strip() == "":
        return None
    try:
        root = _composed(text)
    except YAMLError as exc:
        raise YamlRejected("yaml_syntax_error", f"frontmatter is not valid YAML: {type(exc).__name__}") from None
    if root is None:
        return None
    if not isinstance(root, MappingNode):
        raise YamlRejected("frontmatter_not_mapping", "frontmatter must be a YAML mapping")
    if root.flow_style:
        raise YamlRejected("yaml_flow_style_unsupported", "frontmatter root must be a block mapping")
    _check_tree(root, 0, [0])
    return root


def _check_tree(node: Node, depth: int, count: list[int]) -> None:
    """Fail closed on anchors (an alias composes to its anchored node), merge keys,
    duplicate or complex keys, and graphs beyond the read side's YAML limits."""
    count[0] += 1
    if getattr(node, "anchor", None):
        raise YamlRejected("yaml_alias_unsupported", "frontmatter uses YAML anchors or aliases; edit it by hand")
    if depth > MAX_DEPTH or count[0] > MAX_NODES:
        raise YamlRejected("resource_limit", "frontmatter YAML is too deep or too large")
    if isinstance(node, MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if not isinstance(key, ScalarNode):
                raise YamlRejected("yaml_complex_key_unsupported", "frontmatter uses a non-scalar mapping key")
            if (key.tag or "").endswith(":merge") or key.value == "<<":
                raise YamlRejected("yaml_merge_key_unsupported", "frontmatter uses a YAML merge key")
            if key.value in seen:
                raise YamlRejected("yaml_duplicate_key", f"frontmatter key {key.value!r} is duplicated")
            seen.add(key.value)
            _check_tree(value, depth + 1, count)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            _check_tree(item, depth + 1, count)


def lookup(mapping: MappingNode, key: str) -> tuple[ScalarNode, Node] | None:
    for k, v in mapping.value:
        if k.value == key:
            return k, v
    return None


def scalar(node: Node | None) -> str | None:
    """Raw text of a scalar node, None for anything else."""
    return node.value if isinstance(node, ScalarNode) else None


@functools.lru_cache(maxsize=4096)
def _plain_round_trips(text: str) -> bool:
    doc = f"k: {text}\n"
    try:
        if pyyaml.load(doc, Loader=_yaml_11_loader(text)) != {"k": text}:
            return False
        node = _composed(doc)
    except Exception:
        return False
    if not isinstance(node, MappingNode):
        return False
    value = node.value[0][1]
    return isinstance(value, ScalarNode) and value.value == text and (value.tag or "").endswith(":str")


def _yaml_11_loader(text: str) -> type:
    """PyYAML's safe loader for the YAML 1.1 reading of ``k: text``: the libyaml one (ten times
    faster; a v0.1 -> v0.2 migration plan checks thousands of values), except for a text holding
    a tab, which libyaml reads as a plain scalar where PyYAML's own parser refuses it. Otherwise
    the two agreed on every one-line text a differential property test tried (60,000 texts of
    indicators, quotes, escapes and line-break look-alikes; tests/okf/write/test_yaml_text_loaders.py)."""
    return pyyaml.SafeLoader if "\t" in text else pyyaml.CSafeLoader


def render_scalar(value: Any) -> str:
    """YAML text for a scalar: plain when it reads back as the same string in both YAML 1.1
    and 1.2, double-quoted JSON otherwise (so ``0.2`` and dates stay strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if text and text == text.strip() and "\n" not in text and _plain_round_trips(text):
        return text
    return json.dumps(text, ensure_ascii=False)


class IntText(str):
    """A decimal string emitted as a plain YAML integer (``usage_count``)."""


def render_block(key: str, value: Any, indent: int) -> list[str]:
    """Lines (without newlines) of ``key: value`` in block style at ``indent`` spaces."""
    pad = " " * indent
    k = render_scalar(key)
    if isinstance(value, IntText):
        return [f"{pad}{k}: {value}"]
    if isinstance(value, dict):
        if not value:
            return [f"{pad}{k}: {{}}"]
        lines = [f"{pad}{k}:"]
        for sub_key, sub_value in value.items():
            lines += render_block(sub_key, sub_value, indent + 2)
        return lines
    if isinstance(value, (list, tuple)):
        if not value:
            return [f"{pad}{k}: []"]
        lines = [f"{pad}{k}:"]
        for item in value:
            lines += render_item(item, indent + 2)
        return lines
    return [f"{pad}{k}: {render_scalar(value)}"]


def render_item(item: Any, dash_indent: int) -> list[str]:
    """Lines of one block-sequence item whose dash sits at ``dash_indent``."""
    pad = " " * dash_indent
    if isinstance(item, dict) and item:
        lines: list[str] = []
        for sub_key, sub_value in item.items():
            lines += render_block(sub_key, sub_value, dash_indent + 2)
        lines[0] = pad + "- " + lines[0][dash_indent + 2:]
        return lines
    if isinstance(item, IntText):
        return [f"{pad}- {item}"]
    return [f"{pad}- {render_scalar(item)}"]

"""Surgical edits on frontmatter text: set, delete and append at node granularity.

Every primitive returns a new text in which only the named key's (or item's) lines changed;
neighbouring keys, comments, blank lines, key order and quoting survive byte for byte. Spans
come from the composed node marks: an entry runs from its key to the next sibling (or the
end of its container), minus trailing blank and comment-only lines, which stay in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ruamel.yaml.nodes import MappingNode, Node, SequenceNode

from knowspec.impl.okf.write.yaml_text import (
    YamlRejected, compose, lookup, render_block, render_item, render_scalar,
)

_FORBIDDEN_BREAKS = ("\x85", "\u2028", "\u2029")


class Editor:
    """One immutable frontmatter text plus its composed tree and line offsets."""

    def __init__(self, text: str, newline: str = "\n") -> None:
        if any(ch in text for ch in _FORBIDDEN_BREAKS) or "\r" in text.replace("\r\n", ""):
            raise YamlRejected("yaml_line_break_unsupported", "frontmatter uses unusual line breaks")
        self.text = text
        self.nl = newline
        self.root = compose(text)
        self.starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.starts.append(i + 1)
        if self.starts[-1] == len(text):
            self.starts.pop()
        self.nlines = len(self.starts)

    # ----- positions -------------------------------------------------------------------
    def line_start(self, line: int) -> int:
        return self.starts[line] if line < self.nlines else len(self.text)

    def line_text(self, line: int) -> str:
        return self.text[self.line_start(line):self.line_start(line + 1)]

    def _trim(self, start_line: int, end_line: int) -> int:
        while end_line - 1 > start_line:
            stripped = self.line_text(end_line - 1).strip()
            if stripped and not stripped.startswith("#"):
                break
            end_line -= 1
        return end_line

    def entry_end(self, mapping: MappingNode, end_line: int, key: str) -> int:
        """Exclusive end line of ``key``'s entry in ``mapping`` (trimmed)."""
        keys = [k for k, _ in mapping.value]
        for i, k in enumerate(keys):
            if k.value == key:
                nxt = keys[i + 1].start_mark.line if i + 1 < len(keys) else end_line
                return self._trim(k.start_mark.line, nxt)
        raise KeyError(key)

    def dash_line(self, item: Node) -> int:
        line = item.start_mark.line
        while line > 0 and not self.line_text(line).lstrip().startswith("-"):
            line -= 1
        return line

    def item_end(self, seq: SequenceNode, end_line: int, index: int) -> int:
        start = self.dash_line(seq.value[index])
        nxt = self.dash_line(seq.value[index + 1]) if index + 1 < len(seq.value) else end_line
        return self._trim(start, nxt)

    def _joined(self, lines: list[str]) -> str:
        return "".join(line + self.nl for line in lines)

    def _splice(self, start: int, end: int, new: str) -> str:
        return self.text[:start] + new + self.text[end:]

    # ----- mapping primitives ----------------------------------------------------------
    def set_key(self, mapping: MappingNode | None, end_line: int, key: str, value: Any) -> str:
        found = lookup(mapping, key) if mapping is not None else None
        if found is None:
            return self.append_keys(mapping, end_line, [(key, value)])
        assert mapping is not None
        if mapping.flow_style:
            raise YamlRejected("yaml_flow_style_unsupported", f"cannot edit inside a flow mapping to set {key!r}")
        k, _ = found
        col = k.start_mark.column
        lines = render_block(key, value, col)
        lines[0] = lines[0][col:]
        end = self.line_start(self.entry_end(mapping, end_line, key))
        return self._splice(k.start_mark.index, end, self._joined(lines))

    def append_keys(self, mapping: MappingNode | None, end_line: int, items: list[tuple[str, Any]]) -> str:
        """Keys absent from ``mapping`` added after its last entry, in order, in one splice: the
        text that setting them one at a time (composing in between) gives, for one composition."""
        if mapping is not None and mapping.flow_style:
            raise YamlRejected("yaml_flow_style_unsupported",
                               f"cannot edit inside a flow mapping to set {items[0][0]!r}")
        if mapping is not None and any(lookup(mapping, key) is not None for key, _ in items):
            raise ValueError("append_keys adds absent keys only")
        col = mapping.value[0][0].start_mark.column if mapping is not None else 0
        new = self._joined([line for key, value in items for line in render_block(key, value, col)])
        if mapping is None:  # empty frontmatter
            return new + self.text
        at = self.line_start(self.entry_end(mapping, end_line, mapping.value[-1][0].value))
        return self._splice(at, at, new)

    def delete_key(self, mapping: MappingNode, end_line: int, key: str) -> str:
        start, end = self.removal_span(mapping, end_line, key)
        return self._splice(start, end, "")

    def removal_span(self, mapping: MappingNode, end_line: int, key: str) -> tuple[int, int]:
        """The offsets of the text that removing ``key`` deletes ((0, 0) when it is absent)."""
        if mapping.flow_style:
            raise YamlRejected("yaml_flow_style_unsupported", f"cannot edit inside a flow mapping to remove {key!r}")
        keys = [k for k, _ in mapping.value]
        idx = next((i for i, k in enumerate(keys) if k.value == key), None)
        if idx is None:
            return 0, 0
        k = keys[idx]
        prefix = self.text[self.line_start(k.start_mark.line):k.start_mark.index]
        if prefix.strip() and idx + 1 < len(keys):  # first key on a "- " line: pull the next key up
            return k.start_mark.index, keys[idx + 1].start_mark.index
        if prefix.strip():
            raise YamlRejected("yaml_shape_unsupported", f"cannot remove the only key {key!r} of a sequence item")
        return self.line_start(k.start_mark.line), self.line_start(self.entry_end(mapping, end_line, key))

    # ----- sequence primitives ---------------------------------------------------------
    def append_item(self, seq: SequenceNode, end_line: int, item: Any) -> str:
        if seq.flow_style or not seq.value:
            raise YamlRejected("yaml_flow_style_unsupported", "cannot append to a flow or empty sequence in place")
        first_dash = self.dash_line(seq.value[0])
        dash_col = len(self.line_text(first_dash)) - len(self.line_text(first_dash).lstrip())
        at = self.line_start(self.item_end(seq, end_line, len(seq.value) - 1))
        return self._splice(at, at, self._joined(render_item(item, dash_col)))

    def delete_item(self, seq: SequenceNode, end_line: int, index: int) -> str:
        if seq.flow_style:
            raise YamlRejected("yaml_flow_style_unsupported", "cannot remove an item of a flow sequence")
        start = self.line_start(self.dash_line(seq.value[index]))
        end = self.line_start(self.item_end(seq, end_line, index))
        return self._splice(start, end, "")

    def mapping_as_first_item(self, key: str, mapping: MappingNode, end_line: int, extra: Any) -> str:
        """Turn ``key: <block mapping>`` into a sequence whose first item is that mapping,
        re-indented but otherwise byte-identical, followed by ``extra``."""
        if mapping.flow_style:
            raise YamlRejected("yaml_flow_style_unsupported", f"{key!r} is a flow mapping; edit it by hand")
        assert self.root is not None  # the caller found ``key`` in it
        k, _ = lookup(self.root, key)  # type: ignore[misc]
        col = k.start_mark.column
        first = mapping.value[0][0]
        body_col = first.start_mark.column
        if first.start_mark.line == k.start_mark.line:
            raise YamlRejected("yaml_shape_unsupported", f"{key!r} value starts on its key line")
        end = self.entry_end(self.root, end_line, key)
        dash_col = col + 2
        out = [" " * col + render_scalar(key) + ":"]
        for i, line_no in enumerate(range(first.start_mark.line, end)):
            raw = self.line_text(line_no).rstrip("\r\n")
            rest = raw[body_col:] if raw[:body_col].strip() == "" else raw.lstrip()
            lead = "- " if i == 0 else "  "
            out.append(" " * dash_col + lead + rest if rest else "")
        out += render_item(extra, dash_col)
        return self._splice(self.line_start(k.start_mark.line), self.line_start(end), self._joined(out))


@dataclass(frozen=True)
class RootEdits:
    """Root keys appended to, and removed from, one composed frontmatter, so that several steps
    edit one composition: ``text`` is what making each edit on a freshly composed text gives.

    Appended keys go after the root's last entry, so every removed span lies before them. A
    removal that could move that place (the last key, with nothing appended yet: the new last
    key's trailing comments would then follow the appended keys) is declined with None."""

    editor: Editor
    appended: tuple[tuple[str, Any], ...] = ()
    removed: tuple[tuple[str, int, int], ...] = ()  # (key, start, end)

    def _appended(self, key: str) -> bool:
        return any(k == key for k, _ in self.appended)

    def _in_root(self, key: str) -> bool:
        root = self.editor.root
        return root is not None and lookup(root, key) is not None

    def has(self, key: str) -> bool:
        return self._appended(key) or (self._in_root(key) and all(k != key for k, _, _ in self.removed))

    def append(self, key: str, value: Any) -> RootEdits:
        """``key`` added after the root's last entry; it must be absent from the composed text."""
        if self._appended(key) or self._in_root(key):
            raise ValueError(f"{key!r} is in the frontmatter already")
        return RootEdits(self.editor, (*self.appended, (key, value)), self.removed)

    def remove(self, key: str) -> RootEdits | None:
        if self._appended(key):
            return None
        if not self.has(key):
            return self
        root = self.editor.root
        assert root is not None  # the key is in it
        if not self.appended and root.value[-1][0].value == key:
            return None
        start, end = self.editor.removal_span(root, self.editor.nlines, key)
        return RootEdits(self.editor, self.appended, (*self.removed, (key, start, end)))

    def text(self) -> str:
        ed = self.editor
        text = ed.append_keys(ed.root, ed.nlines, list(self.appended)) if self.appended else ed.text
        for _, start, end in sorted(self.removed, key=lambda r: r[1], reverse=True):
            text = text[:start] + text[end:]
        return text

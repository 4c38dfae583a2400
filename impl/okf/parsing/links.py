"""Inline link extraction (line scanner), classification and navigation resolution.

Pure rules of spec/okf/contract/read.md §1.6 and gaps.md §2.2-2.3. The scanner works on one prose-masked line
at a time, so links never span lines and never come from code.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple


_WS = re.compile(r"^\s+|\s+$")


_SIMPLE_ALL = re.compile(r"\[[^\[\]\\]*\]\(([^()\\]*)\)")


def scan_line_links(line: str) -> list[str]:
    """Extract inline link destinations (title stripped, nothing decoded) from one line."""
    if "\\" not in line:
        simple = _SIMPLE_ALL.findall(line)
        if len(simple) == line.count("["):  # every `[` opens a plain link: same result, faster
            return [strip_link_title(t) for t in simple]
    out: list[str] = []
    n = len(line)
    pairs: _Pairs | None = None
    i = 0
    while i < n:
        i = line.find("[", i)
        if i < 0:
            break
        if _odd_backslashes(line, i):
            i += 1
            continue
        plain = _SIMPLE_LINK.match(line, i)
        if plain is not None:  # no nesting and no escapes: the common case, same result
            parsed: tuple[str, int] | None = (plain.group(1), plain.end())
        elif _PLAIN_NOT_LINK.match(line, i):  # the text closes at depth 0 and no `(` follows
            parsed = None
        else:
            pairs = pairs or _Pairs(line)
            parsed = pairs.inline_link(i)
        if parsed is None:
            i += 1
            continue
        target, after = parsed
        out.append(strip_link_title(target))
        i = after
    return out


def _odd_backslashes(line: str, pos: int) -> bool:
    n = 0
    while pos - n - 1 >= 0 and line[pos - n - 1] == "\\":
        n += 1
    return n % 2 == 1


_SIMPLE_LINK = re.compile(r"\[[^\[\]\\]*\]\(([^()\\]*)\)")


_PLAIN_NOT_LINK = re.compile(r"\[[^\[\]\\]*\](?!\()")


class _Pairs:
    """Where each ``[`` and ``(`` of a line closes (a backslash escapes the character after it;
    an opener without its closer is absent), found in one pass. Scanning forward from every
    ``[`` for its ``]`` instead was quadratic: a line of 20,000 ``[`` took minutes, holding the
    call past its deadline. The first closer at depth 0 after an opener is the one a stack pairs
    it with, so the links found are the same."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.close: dict[int, int] = {}
        open_at: dict[str, list[int]] = {"[": [], "(": []}
        opener = {"]": "[", ")": "("}
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in open_at:
                open_at[ch].append(i)
            elif ch in opener and open_at[opener[ch]]:
                self.close[open_at[opener[ch]].pop()] = i
            i += 1

    def inline_link(self, start: int) -> tuple[str, int] | None:
        """(destination, index after the link) of the ``[text](destination)`` opening at
        ``start``, or None: the text's ``]`` must be followed by ``(``, which must close."""
        text_end = self.close.get(start)
        if text_end is None or text_end + 1 >= len(self.line) or self.line[text_end + 1] != "(":
            return None
        dest_end = self.close.get(text_end + 1)
        if dest_end is None:
            return None
        return self.line[text_end + 2:dest_end], dest_end + 1


_FIRST_BLANK = re.compile(r"[ \t]")


def strip_link_title(dest: str) -> str:
    """Remove a quoted title: only when the first space/tab is followed by ``"`` or ``'``."""
    dest = dest.strip()
    if " " not in dest and "\t" not in dest:
        return dest  # the common case, without the search
    m = _FIRST_BLANK.search(dest)
    if m is None:
        return dest
    rest = dest[m.start():].lstrip(" \t")
    return dest[: m.start()] if rest[:1] in ('"', "'") else dest


def classify_link(target: str) -> str:
    """other | anchor | external | absolute | relative."""
    t = target.strip()
    if t == "":
        return "other"
    if t.startswith("#"):
        return "anchor"
    low = t.lower()
    if "://" in t or low.startswith(("//", "mailto:", "tel:", "data:")):
        return "external"
    if t.startswith("/"):
        return "absolute"
    return "relative"


class NavLink(NamedTuple):
    """A body link of a concept.

    ``target``: the extracted destination; ``kind``: other|anchor|external|absolute|relative;
    ``target_id``: the resolved concept ID, or ``None`` (not resolvable: external, anchor,
    directory link, invalid segment); ``fragment``: text after the first ``#`` (or ``None``);
    ``line``: 1-based file line.
    """

    target: str
    kind: str
    target_id: str | None
    fragment: str | None
    line: int


_BAD_SEGMENT_CHAR = re.compile(r"[\\\x00-\x1f\x7f]")


def resolve_link_target(source_id: str, target: str, kind: str | None = None) -> str | None:
    """Resolve an absolute/relative target to a concept ID (navigation rules), or None."""
    t = target.strip()
    if kind is None:
        kind = classify_link(t)
    if kind not in ("absolute", "relative"):
        return None
    cut = len(t)
    for sep in ("?", "#"):
        pos = t.find(sep)
        if 0 <= pos < cut:
            cut = pos
    path = t[:cut]
    if path == "" or path.endswith("/"):
        return None
    if kind == "absolute":
        segments: list[str] = []
        path = path.lstrip("/")
    else:
        segments = source_id.split("/")[:-1]
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if segments:
                segments.pop()
            continue
        segments.append(seg)
    if not segments:
        return None
    if segments[-1].endswith(".md"):
        segments[-1] = segments[-1][:-3]
    if segments[-1] == "":
        return None
    joined = "/".join(segments)
    if _BAD_SEGMENT_CHAR.search(joined):
        return None
    return joined


# An entry is ~300 bytes (key, record, strings). The shared memo serves the readers of one
# concept's links (navigation, read_concept); a whole-bundle build brings its own memo
# (:func:`resolve_target_ids`). databricks-okf resolves 56,700 links, 10,100 distinct, that a
# bundle's concepts repeat near each other (one folder's concepts link alike): 4,096 entries kept
# 46,354 of the 46,539 hits of an unbounded memo in a whole-bundle read, in 1.2 MiB instead of 2.9.
CLASSIFIED_MEMO_ENTRIES = 4096


def classify_target(source_dir: str, target: str) -> tuple[str, str | None, str | None]:
    """(kind, target id, fragment) of a stripped target seen from a source directory."""
    kind = classify_link(target)
    hash_pos = target.find("#")
    fragment = target[hash_pos + 1 :] if hash_pos >= 0 else None
    source = f"{source_dir}/_" if source_dir else "_"
    return kind, resolve_link_target(source, target, kind), fragment


@lru_cache(maxsize=CLASSIFIED_MEMO_ENTRIES)
def _classified(source_dir: str, target: str) -> tuple[str, str | None, str | None]:
    """:func:`classify_target`, shared by the readers of one concept's links: bundles repeat
    the same targets (``/concepts/x.md``) thousands of times."""
    return classify_target(source_dir, target)


def resolve_navigation(source_id: str, raw_links) -> list[NavLink]:
    """NavLinks for a concept's extracted links (every link, resolved or not)."""
    source_dir = source_id.rpartition("/")[0]
    out = []
    for raw in raw_links:
        kind, target_id, fragment = _classified(source_dir, raw.target.strip())
        out.append(NavLink(raw.target, kind, target_id, fragment, raw.line))
    return out


TargetMemo = dict[tuple[str, str], "str | None"]  # (source folder, stripped target) -> target id
BUILD_MEMO_ENTRIES = 32768  # ~10 MiB at most, for one build; databricks-okf has 10,100 distinct


def resolve_target_ids(source_id: str, targets: list[str], memo: TargetMemo | None = None) -> list[str | None]:
    """The ``target_id`` of each of :func:`resolve_navigation`'s links, without the records.

    A whole-bundle build (the edge index, the graph renders) passes its own ``memo``, dropped
    with the build: read through the shared bounded memo, a bundle with more distinct links than
    it holds (databricks-okf: 10,100) replaced thousands of its entries in each build, and those
    made among the build's transient objects kept their freed arenas resident (Python returns
    an arena only once it is empty)."""
    source_dir = source_id.rpartition("/")[0]
    if memo is None:
        return [_classified(source_dir, target.strip())[1] for target in targets]
    out = []
    for target in targets:
        key = (source_dir, target.strip())
        try:
            found = memo[key]
        except KeyError:
            if len(memo) >= BUILD_MEMO_ENTRIES:
                memo.clear()  # a huge bundle's build: bounded, and nearby links still hit
            found = memo[key] = classify_target(*key)[1]
        out.append(found)
    return out

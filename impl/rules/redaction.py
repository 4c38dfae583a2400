"""Path redaction for every error and diagnostic message (spec/okf/contract/read.md §4.4, kept meaningful).

An agent must never learn where a bundle or pool lives on the server, but it must still learn
what went wrong. So a local file-system path inside a message is replaced by ``<path>`` and the
rest of the message is kept: ``bundle folder not found: <path>``. What counts as a path is the
contract's rule, applied to each word after repeated percent-decoding: a ``/`` or ``\\\\`` at a
word boundary, a Windows drive (``C:\\``), a ``file:`` URI, ``~/``, or a ``..`` segment. Clean
``http(s)`` URLs with a host, and this server's own REST routes (``POST /ClientREST/Login``), are
not file-system paths and stay.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

REDACTED = "operation failed; sensitive path redacted"  # a fixed contract text some tools still send
PLACEHOLDER = "<path>"
MAX_MESSAGE_BYTES = 512
TRUNCATION_MARK = " [truncated]"

_BOUNDARY_CHARS = "\"'`()[]{}<>=:,;|"
_BOUNDARY = r"(?:^|[\s\"'`()\[\]{}<>=:,;|])"
_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?(?:\?[^\s]*)?(?:#[^\s]*)?", re.I)
_SLASH_PATH = re.compile(_BOUNDARY + r"/")
_BACKSLASH_PATH = re.compile(_BOUNDARY + r"\\\\")
_DRIVE_PATH = re.compile(r"(?:^|[^A-Za-z0-9])[A-Za-z]:[\\/]")
# A file: URI scheme (file:///x, file:x), not the word "file:" in prose ("target file: a.md").
_FILE_SCHEME = re.compile(r"(?:^|[^A-Za-z0-9+.-])file:(?=[^\s])", re.I)
# A ``..`` segment where a path may start (the contract's boundary) or inside one.
_DOTDOT = re.compile(r"(?:^|[/\\\s\"'`()\[\]{}<>=:,;|])\.\.(?:[/\\]|$)")
# Where a path starts inside one word: the contract's boundary, then /, \\, a drive, file:, ~/ or ../
_PATH_START = re.compile(
    r"(?:(?<=^)|(?<=[" + re.escape(_BOUNDARY_CHARS) + r"]))(?:/(?!$)|\\\\|~[/\\]|\.\.[/\\]|\.\.$)"
    r"|(?:(?<=^)|(?<=[^A-Za-z0-9]))[A-Za-z]:[\\/]"
    r"|(?:(?<=^)|(?<=[^A-Za-z0-9+.-]))file:(?=\S)",
    re.I,
)
# This server's own HTTP routes: named in messages ("log in at POST /ClientREST/Login").
_ROUTE = re.compile(r"/(?:ClientREST|AdminREST)/[A-Za-z]+|/mcp|/healthz|/openapi\.json")
_TRAILING = "\"'`)]}>,;:.!?"
_ROUTE_WORD = re.compile(r"(?<![^\s\"'`(\[{<=:,;|])(?:" + _ROUTE.pattern + r")(?![^\s\"'`)\]}>,;:.!?])")
_LONE_SLASH = re.compile(r"(?<!\S)/(?!\S)")
_QUOTED = re.compile(r"([\"`])([^\"`\n]{1,4096}?)\1")


def _decoded_forms(text: str, rounds: int = 8) -> list[str]:
    forms = [text]
    for _ in range(rounds):
        nxt = unquote(forms[-1])
        if nxt == forms[-1]:
            break
        forms.append(nxt)
    return forms


def looks_like_path(text: str) -> bool:
    """The contract's test: does ``text`` (or a percent-decoded form) contain a local path?"""
    for form in _decoded_forms(text):
        if _DOTDOT.search(form) or _FILE_SCHEME.search(form):
            return True
        without = _ROUTE_WORD.sub("ROUTE", _URL.sub("URL", form))
        if _SLASH_PATH.search(without) or _BACKSLASH_PATH.search(without) or _DRIVE_PATH.search(without):
            return True
    return False


def _is_kept(word: str) -> bool:
    """A clean URL or one of our routes, with nothing path-like hidden in it."""
    core = word.rstrip(_TRAILING)
    if _ROUTE.fullmatch(core):
        return True
    return bool(_URL.fullmatch(core)) and not any(".." in f or "\\" in f for f in _decoded_forms(core))


def _redact_word(word: str) -> tuple[str, bool]:
    """``word`` with any path in it replaced; ``True`` when something was replaced."""
    if _is_kept(word):
        return word, False
    for form in _decoded_forms(word):
        if _ROUTE.fullmatch(form.rstrip(_TRAILING)) or _URL.fullmatch(form.rstrip(_TRAILING)):
            continue
        match = _PATH_START.search(form)
        if match is None:
            continue
        head = form[: match.start()]
        tail = form[match.start():]
        kept_tail = tail[len(tail.rstrip(_TRAILING)):]
        return head + PLACEHOLDER + kept_tail, True
    return word, False


def _redact_quoted(match: re.Match[str]) -> str:
    quote, inner = match.group(1), match.group(2)
    starts_path = any(_PATH_START.match(form) for form in _decoded_forms(inner))
    if " " in inner and starts_path and not _is_kept(inner):
        return f"{quote}{PLACEHOLDER}{quote}"
    return match.group(0)


def redact_paths(text: str) -> str:
    """``text`` with every local path replaced by ``<path>``; everything else is kept.

    A path with spaces in it is caught whole when quoted; unquoted, the words after it that
    still hold a slash or backslash are taken as its continuation (``/srv/my docs/a.md``).
    """
    text = _QUOTED.sub(_redact_quoted, text)
    parts = re.split(r"(\s+)", text)
    out: list[str] = []
    in_path = False  # the last word ended in a placeholder
    for index, part in enumerate(parts):
        if index % 2:  # whitespace
            out.append(part)
            continue
        if in_path and out and out[-1] == " " and ("/" in part or "\\" in part) and not _is_kept(part):
            out.pop()  # this word continues the path: it joins the placeholder
            tail = part[len(part.rstrip(_TRAILING)):]
            out[-1] = out[-1][: out[-1].rfind(PLACEHOLDER) + len(PLACEHOLDER)] + tail
            continue
        redacted, in_path = _redact_word(part)
        out.append(redacted)
    return "".join(out)


def truncate_utf8(text: str, limit: int = MAX_MESSAGE_BYTES, mark: str = TRUNCATION_MARK) -> str:
    """At most ``limit`` bytes, cut on a character boundary and ending with ``mark``."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    room = limit - len(mark.encode("utf-8"))
    return raw[:room].decode("utf-8", errors="ignore") + mark


def redact_message(text: str) -> str:
    """Paths replaced by ``<path>`` (a safety net: if anything path-like survives, the whole
    message becomes the contract's fixed text), then cut to 512 bytes."""
    cleaned = redact_paths(text)
    if looks_like_path(_LONE_SLASH.sub(" ", cleaned)):  # "1 / 2" is arithmetic, not a path
        return REDACTED
    return truncate_utf8(cleaned)


_SAFE_REL = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[^\\\x00-\x1f]+$")


def safe_file(path: str) -> str:
    """A diagnostic ``file`` field: kept only when it is a safe bundle-relative slash path."""
    if not path:
        return ""
    if len(path.encode("utf-8")) > MAX_MESSAGE_BYTES or not _SAFE_REL.match(path) or _DRIVE_PATH.match(path):
        return ""
    return path

"""Path redaction for every error and diagnostic message (spec/okf/contract/read.md §4.4).

A message that, after repeated percent-decoding, looks as if it contains a local path is
replaced wholesale: an agent must never learn where a bundle or pool lives on the server.
Clean ``http(s)`` URLs with a host are allowed.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

REDACTED = "operation failed; sensitive path redacted"
MAX_MESSAGE_BYTES = 512
TRUNCATION_MARK = " [truncated]"

_BOUNDARY = r"(?:^|[\s\"'`()\[\]{}<>=:,;|])"
_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?(?:\?[^\s]*)?(?:#[^\s]*)?", re.I)
_SLASH_PATH = re.compile(_BOUNDARY + r"/")
_BACKSLASH_PATH = re.compile(_BOUNDARY + r"\\\\")
_DRIVE_PATH = re.compile(r"(?:^|[^A-Za-z0-9])[A-Za-z]:[\\/]")
# A file: URI scheme (file:///x, file:x), not the word "file:" in prose ("target file: a.md").
_FILE_SCHEME = re.compile(r"(?:^|[^A-Za-z0-9+.-])file:(?=[^\s])", re.I)


def _decoded_forms(text: str, rounds: int = 8) -> list[str]:
    forms = [text]
    for _ in range(rounds):
        nxt = unquote(forms[-1])
        if nxt == forms[-1]:
            break
        forms.append(nxt)
    return forms


def looks_like_path(text: str) -> bool:
    for form in _decoded_forms(text):
        if ".." in form or _FILE_SCHEME.search(form):
            return True
        without_urls = _URL.sub("URL", form)
        if _SLASH_PATH.search(without_urls) or _BACKSLASH_PATH.search(without_urls) or _DRIVE_PATH.search(without_urls):
            return True
    return False


def truncate_utf8(text: str, limit: int = MAX_MESSAGE_BYTES, mark: str = TRUNCATION_MARK) -> str:
    """At most ``limit`` bytes, cut on a character boundary and ending with ``mark``."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    room = limit - len(mark.encode("utf-8"))
    return raw[:room].decode("utf-8", errors="ignore") + mark


def redact_message(text: str) -> str:
    if looks_like_path(text):
        return REDACTED
    return truncate_utf8(text)


_SAFE_REL = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[^\\\x00-\x1f]+$")


def safe_file(path: str) -> str:
    """A diagnostic ``file`` field: kept only when it is a safe bundle-relative slash path."""
    if not path:
        return ""
    if len(path.encode("utf-8")) > MAX_MESSAGE_BYTES or not _SAFE_REL.match(path) or _DRIVE_PATH.match(path):
        return ""
    return path

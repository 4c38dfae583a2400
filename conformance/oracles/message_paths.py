"""Does an error message hold a local path? The contract's redaction test (read.md §4.4), read
narrowly so that it judges only what is a path on any reading.

The contract redacts a message that, after repeated percent-decoding, holds a ``/`` or ``\\\\``
at the start or after whitespace or one of ``"'`()[]{}<>=:,;|``, a Windows drive path, a
``file:`` scheme or ``..``; clean ``http(s)`` URLs with a host stay. A server may replace the
whole message (the contract's fixed text) or only the path; either way none of it is left. Read
narrowly here: a slash must start a name (``a / b`` is arithmetic), and ``..`` must lead into a
further segment (``../kb``; an ellipsis or a range ``1 .. 5`` in prose is not judged).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[^\s?#]*)?", re.I)
_AT_BOUNDARY = r"(?:^|(?<=[\s\"'`()\[\]{}<>=:,;|]))"
_PATH = re.compile(
    _AT_BOUNDARY + r"(?:/[^\s/]|\\\\)\S*"                 # /srv/kb, \\server\share
    r"|(?:^|(?<=[^A-Za-z0-9]))[A-Za-z]:[\\/]\S*"       # C:\kb, c:/kb
    r"|(?:^|(?<=[^A-Za-z0-9+.-]))file:\S+"              # file:///srv/kb
    r"|(?:^|(?<=[/\\\s\"'`(\[{<=:,;|]))\.\.[/\\]\S*",   # ../kb, a/../b
    re.I,
)


def _decoded_forms(text: str, rounds: int = 8) -> list[str]:
    forms = [text]
    for _ in range(rounds):
        decoded = unquote(forms[-1])
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    return forms


def path_in_message(message: str) -> str | None:
    """The first local path ``message`` holds (as found, maybe percent-decoded), or None."""
    for form in _decoded_forms(message):
        found = _PATH.search(_URL.sub(" ", form))
        if found:
            return found.group(0)
    return None

"""Byte-exact frontmatter/body spans of a Markdown document (spec/okf/contract/read.md §1.3).

The editor only ever rewrites the frontmatter span (and, for inline computations, the
body); the delimiters, line endings and every other byte are carried over unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass


class DocumentError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Document:
    open_line: str      # "---\n" / "---\r\n"; "" when the document has no frontmatter
    frontmatter: str    # the YAML bytes between the delimiters (newline before the close included)
    close_line: str     # the closing "---" line with its line ending ("" at EOF)
    body: str           # everything after the closing line

    @property
    def has_frontmatter(self) -> bool:
        return bool(self.open_line)

    @property
    def newline(self) -> str:
        return "\r\n" if self.open_line.endswith("\r\n") else "\n"

    def render(self) -> str:
        return self.open_line + self.frontmatter + self.close_line + self.body


def _split_first_line(text: str, start: int) -> tuple[str, int]:
    end = text.find("\n", start)
    if end < 0:
        return text[start:], len(text)
    return text[start:end + 1], end + 1


def split_document(raw: bytes) -> Document:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentError("invalid_encoding", "document is not valid UTF-8") from None
    first, pos = _split_first_line(text, 0)
    if first not in ("---", "---\n", "---\r\n"):
        return Document("", "", "", text)
    fm_start = pos
    while pos < len(text):
        line, nxt = _split_first_line(text, pos)
        if line in ("---", "---\n", "---\r\n"):
            return Document(first, text[fm_start:pos], line, text[nxt:])
        pos = nxt
    raise DocumentError("unterminated_frontmatter", "unterminated frontmatter")

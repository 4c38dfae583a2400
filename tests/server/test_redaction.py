"""Path redaction (spec/okf/contract/read.md §4.4) and message truncation."""

from __future__ import annotations

import pytest

from knowspec.impl.rules.redaction import REDACTED, redact_message, safe_file, truncate_utf8


@pytest.mark.parametrize(
    "message",
    [
        "open /etc/passwd failed",
        "bundle_path is not accessible: lstat /home/x: permission denied",
        'broken link to "/x.md"',
        "see ../secret",
        "file:///tmp/a",
        "see file:relative.md",
        "C:\\Users\\ana",
        "path=%2Fetc%2Fshadow",
        "double %252Fetc%252Fshadow",
        "(/srv/kb)",
        "\\\\server\\share",
    ],
)
def test_messages_with_paths_are_redacted(message):
    assert redact_message(message) == REDACTED


@pytest.mark.parametrize(
    "message",
    [
        "concept not found: ops/retry",
        "tool input does not match the advertised schema",
        "see https://example.invalid/docs/page for details",
        "ratio 1/2 of files",
        "anchor not found in target file: ops/retry.md",
    ],
)
def test_clean_messages_pass(message):
    assert redact_message(message) == message


def test_long_messages_are_cut_to_512_bytes_on_a_character_boundary():
    out = truncate_utf8("ş" * 400)
    assert len(out.encode("utf-8")) <= 512
    assert out.endswith(" [truncated]")


@pytest.mark.parametrize(("path", "expected"), [
    ("a/b.md", "a/b.md"), ("/abs.md", ""), ("../x.md", ""), ("a/../b.md", ""), ("", ""), ("x" * 600, ""),
])
def test_safe_file(path, expected):
    assert safe_file(path) == expected

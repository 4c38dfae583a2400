"""Path redaction (spec/okf/contract/read.md §4.4, kept meaningful) and message truncation."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from knowspec.impl.rules.redaction import PLACEHOLDER, REDACTED, redact_message, safe_file, truncate_utf8


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("open /etc/passwd failed", "open <path> failed"),
        ("bundle_path is not accessible: lstat /home/x: permission denied",
         "bundle_path is not accessible: lstat <path>: permission denied"),
        ("bundle folder not found: /home/ana/kb", "bundle folder not found: <path>"),
        ('broken link to "/x.md"', 'broken link to "<path>"'),
        ("see ../secret", "see <path>"),
        ("file:///tmp/a", "<path>"),
        ("see file:relative.md", "see <path>"),
        ("C:\\Users\\ana", "<path>"),
        ("copy from C:\\Program Files\\kb failed", "copy from <path> failed"),
        ("path=%2Fetc%2Fshadow", "path=<path>"),
        ("double %252Fetc%252Fshadow", "double <path>"),
        ("(/srv/kb)", "(<path>)"),
        ("\\\\server\\share is down", "<path> is down"),
        ('open "/srv/my docs/a.md" failed', 'open "<path>" failed'),
        ("cannot read /srv/my docs/a.md: denied", "cannot read <path>: denied"),
        ("cannot read /srv/a.md.", "cannot read <path>."),  # the full stop ends the sentence, not the path
        ("see ~/notes", "see <path>"),
    ],
)
def test_paths_become_a_placeholder_and_the_message_stays(message, expected):
    assert redact_message(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        "concept not found: ops/retry",
        "tool input does not match the advertised schema",
        "see https://example.invalid/docs/page for details",
        "ratio 1/2 of files",
        "ratio 1 / 2 of files",
        "anchor not found in target file: ops/retry.md",
        "a valid session is required: log in at POST /ClientREST/Login",
        "IMPORTDOC is run at POST /AdminREST/EXECCOMMAND by a SYSADMIN",
        "MCP lives at /mcp, health at /healthz, the API at /openapi.json.",
        "the bundle's index isn't there",
    ],
)
def test_clean_messages_routes_and_urls_pass(message):
    assert redact_message(message) == message


def test_a_url_hiding_a_traversal_is_not_kept():
    assert redact_message("fetch https://h/../etc/passwd") in (REDACTED, "fetch <path>")


_SEGMENT = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="._-"),
                   min_size=1, max_size=12).filter(lambda s: s not in (".", "..") and ".." not in s)
_WORD = st.text(st.characters(whitelist_categories=("Ll", "Lu"), max_codepoint=0x24F), min_size=1, max_size=10)
_ROOT = st.sampled_from(["/etc/", "/home/", "/srv/", "/tmp/", "/var/lib/", "C:\\", "D:/", "file:///", "~/"])


@given(_WORD, _ROOT, st.lists(_SEGMENT, min_size=1, max_size=5), _WORD)
def test_any_local_path_is_replaced_and_the_words_around_it_kept(before, root, segments, after):
    sep = "\\" if root.endswith("\\") else "/"
    path = root + sep.join(segments)
    assume(not path.endswith("."))  # a final dot reads as the sentence's full stop, kept after <path>
    out = redact_message(f"{before} {path} {after}")
    assert out == f"{before} {PLACEHOLDER} {after}"


@given(_WORD, st.sampled_from(["/ClientREST/Login", "/ClientREST/Logout", "/AdminREST/EXECCOMMAND", "/mcp",
                               "https://docs.example.org/a/b", "http://127.0.0.1:8765/mcp"]), _WORD)
def test_routes_and_urls_are_kept_whole(before, route, after):
    message = f"{before} {route} {after}"
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

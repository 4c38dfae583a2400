"""An OKF error message holds no local path (read.md §4.4): the suite's reading of the rule, and
the check that applies it to every error of a tool with a bundle_path."""

from __future__ import annotations

import sys

import pytest
from hypothesis import example, given, settings, strategies as st

from toy_paths import TARGETS
from knowspec.conformance.config import RunConfig
from knowspec.conformance.mutants.killrate import kill_rate
from knowspec.conformance.oracles.message_paths import path_in_message


@pytest.mark.parametrize(("message", "path"), [
    ("cannot read /tmp/x/catalog.db", "/tmp/x/catalog.db"),
    ("bundle not found (server state /srv/a)", "/srv/a)"),
    ('broken link to "/x.md"', '/x.md"'),
    ("see file:///etc/passwd", "file:///etc/passwd"),
    ("at C:\\kb\\a.md", "C:\\kb\\a.md"),
    ("under \\\\server\\share", "\\\\server\\share"),
    ("a ../b", "../b"),
    ("go %2Fetc%2Fpasswd", "/etc/passwd"),                 # percent-decoded first
    ("https://h.example/?q=/etc/passwd", "/etc/passwd"),  # a URL's query is no clean URL
])
def test_a_path_in_a_message_is_found(message, path):
    assert path_in_message(message) == path


@pytest.mark.parametrize("message", [
    "see https://example.com/a/b", "concept no/such/concept not found", "bundle folder not found: <path>",
    "operation failed; sensitive path redacted", "expected a, b, ...", "1 / 2", "a range 1 .. 5",
    "query must contain Unicode letters or numbers",
])
def test_prose_urls_and_ids_are_no_paths(message):
    assert path_in_message(message) is None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(list("ab /\\.:%2F~\"'()=<>,;|CX") + ["file:", "http://h/", "..", "%2F", "<path>"]),
                max_size=30).map("".join))
@example('"..%2F"/a')  # the path's head held a ../ once decoded: the server kept it
def test_no_message_our_server_sends_is_judged_to_hold_a_path(text):
    """The suite's reading is no wider than the redaction our server applies (the contract's
    test), so a message it sends is never failed for a path it removed."""
    from knowspec.impl.rules.redaction import redact_message

    assert path_in_message(redact_message(text)) is None


def test_another_folder_of_the_server_in_an_error_message_is_killed(toy_contract):
    """The bundle folder had been the only path looked for: a server naming its own state folder
    in every error passed."""
    base = RunConfig(target="", contract_path=toy_contract, max_examples=4, checks=("no_path_leakage",))
    results = list(kill_rate(base, [sys.executable, str(TARGETS / "toy_server.py")], ["leak_server_path"]))
    assert results[0].name == "identity" and results[0].killed_by == ()
    assert results[1].name == "leak_server_path" and results[1].killed

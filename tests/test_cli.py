"""Every subcommand the issues name is mounted (the CLI skips a part only while it is unbuilt)."""

from __future__ import annotations

import pytest

from knowspec.impl.cli import build_parser


def subcommands(parser) -> dict:
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return action.choices
    return {}


def test_top_level_commands():
    assert set(subcommands(build_parser())) == {"serve", "codegen", "spec", "conform", "demo", "bench", "pool", "model", "user"}


@pytest.mark.parametrize(("group", "expected"), [
    ("pool", {"build", "import", "reindex", "remove", "register", "alter", "databases"}),
    ("model", {"build", "check"}),
    ("user", {"add", "grant", "revoke", "passwd", "remove", "list"}),
])
def test_grouped_commands(group, expected):
    assert set(subcommands(subcommands(build_parser())[group])) == expected


@pytest.mark.parametrize("command", [("user", "add"), ("user", "grant"), ("user", "list"), ("user", "revoke"),
                                     ("user", "passwd"), ("user", "remove"),
                                     ("pool", "register"), ("pool", "alter"), ("pool", "databases")])
def test_catalog_commands_offer_only_the_state_options_they_read(command):
    import argparse

    parser = build_parser()
    for name in command:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    options = {o for a in parser._actions for o in a.option_strings}
    assert {"--appdir", "--catalog"} <= options
    assert not options & {"--help-db", "--database"}  # a catalog command would ignore them

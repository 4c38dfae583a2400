"""Report files get their folders before the run, so minutes of checks never end in a crash."""

from __future__ import annotations

import time

from knowspec.conformance.cli import main
from knowspec.conformance.reporters.html import HtmlReporter
from knowspec.conformance.reporters.json_report import JsonReporter
from knowspec.conformance.reporters.junit import JunitReporter


def test_reporters_make_their_folders_when_created(tmp_path):
    for cls, name in ((JunitReporter, "r.xml"), (JsonReporter, "r.json"), (HtmlReporter, "r.html")):
        path = tmp_path / cls.__name__ / "nested" / name
        cls(path)
        assert path.parent.is_dir()


def test_an_unwritable_report_place_fails_at_once_with_exit_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    start = time.monotonic()
    code = main(["--target", "stdio:true", "--junit", str(blocker / "reports" / "c.xml")])
    assert code == 2 and time.monotonic() - start < 10
    assert "cannot write a report there" in capsys.readouterr().err

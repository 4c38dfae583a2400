"""Progress shown to a person: plain lines with counts, rate and ETA when output is not a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from rich.console import Console

from knowspec.conformance.reporters.console import PlainTicker
from knowspec.impl.progress import PhaseProgress, PlainProgress, progress_line
from fake_clock import Clock
from serving import free_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "help"
KNOWSPEC = [sys.executable, "-m", "knowspec.impl.cli"]


def test_a_progress_line_has_counts_percentage_rate_and_eta():
    assert progress_line("pool build", "vectors", 1200, 5000, 4.0) == \
        "pool build: vectors 1200/5000 (24%), 300/s, ETA 13s"
    assert progress_line("pool build", "vectors", 5000, 5000, 125.0) == \
        "pool build: vectors 5000/5000 (100%), 40/s, done in 2m05s"


def test_no_rate_is_claimed_before_a_second_has_passed():
    assert progress_line("pool import", "copying rows", 3, 13, 0.01) == "pool import: copying rows 3/13 (23%)"


def test_plain_lines_come_at_start_every_interval_and_at_the_end():
    out, clock = io.StringIO(), Clock()
    show = PlainProgress("pool build", out, interval=5.0, step=0.10, min_gap=1.0, clock=clock)
    show("vectors", 0, 1000)
    for done in range(1, 1001):
        clock.now += 0.01 if done <= 40 else 0.1   # slow after the first 40
        show("vectors", done, 1000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "pool build: vectors 0/1000 (0%)"
    assert lines[-1].startswith("pool build: vectors 1000/1000 (100%)") and "done in" in lines[-1]
    # 10% steps (100 items = 10 s here) and the 5 s interval both apply: about one line per 5 s
    assert 15 <= len(lines) <= 25
    assert all("ETA" in line for line in lines[1:-1])


def test_a_quick_phase_prints_only_its_start_and_end():
    out, clock = io.StringIO(), Clock()
    show = PlainProgress("pool build", out, clock=clock)
    for done in range(0, 21):
        clock.now += 0.001
        show("topics", done, 20)
    assert len(out.getvalue().splitlines()) == 2


def test_phase_progress_is_plain_when_the_stream_is_not_a_terminal():
    out = io.StringIO()
    with PhaseProgress("pool build", out) as report:
        report("topics", 0, 2)
        report("topics", 2, 2)
    assert out.getvalue().splitlines()[-1].startswith("pool build: topics 2/2 (100%)")


def test_conform_ticker_prints_case_counts_with_eta():
    out, clock = io.StringIO(), Clock()
    ticker = PlainTicker(Console(file=out, width=200), planned=100, clock=clock)
    for n in range(100):
        clock.now += 0.5
        ticker.advance(f"inputs[tool{n}]")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("conform: 10/100 cases (10%), 2.0/s, ETA 45s, last inputs[tool9]")
    assert lines[-1].startswith("conform: 100/100 cases (100%)")
    assert len(lines) == 10


def test_pool_build_piped_prints_each_phase(tmp_path):
    done = subprocess.run([*KNOWSPEC, "pool", "build", str(EXAMPLES), str(tmp_path / "h.db"), "--collection", "demo"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "pool build: topics 0/20 (0%)" in lines
    assert any(line.startswith("pool build: topics 20/20 (100%)") for line in lines)
    assert any(line.startswith("pool build: chunking 20/20 (100%)") for line in lines)
    assert "\r" not in done.stderr


def test_serve_http_says_where_it_listens_once_bound(tmp_path):
    port = free_port()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([*KNOWSPEC, "serve", "--http", f"127.0.0.1:{port}", "--appdir", str(tmp_path)],
                                stdout=subprocess.DEVNULL, stderr=err, env={**os.environ})
        try:
            deadline = time.monotonic() + 60
            text = ""
            while "health:" not in text:
                assert proc.poll() is None and time.monotonic() < deadline, text
                time.sleep(0.1)
                err.seek(0)
                text = err.read().decode()
            base = f"http://127.0.0.1:{port}"
            assert f"listening on {base}" in text
            for url in (f"{base}/mcp", f"{base}/ClientREST/", f"{base}/openapi.json", f"{base}/healthz"):
                assert url in text
            # printed after the bind: the health URL answers at once
            with urllib.request.urlopen(f"{base}/healthz", timeout=10) as answer:
                assert answer.status == 200
        finally:
            proc.terminate()
            proc.wait(10)


@pytest.mark.parametrize("argv", [["pool", "build", "--help"], ["serve", "--help"]])
def test_help_still_works(argv):
    done = subprocess.run([*KNOWSPEC, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage:" in done.stdout

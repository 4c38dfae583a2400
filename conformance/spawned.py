"""The stdio targets a run started, so an interrupted run (Ctrl-C, SIGTERM) can stop them.

The MCP SDK starts each stdio target in a process group of its own and stops it when its
session closes; a run cut short never closes its sessions (worker threads die with the
process), and a target that does not read its stdin would run on. ``connect`` notes the child
that a session start left behind; ``stop_all`` ends each noted group that is still our child.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Iterator

_GROUPS: set[int] = set()
_LOCK = threading.Lock()


def children() -> set[int]:
    """This process's live direct children that lead a process group of their own."""
    me = os.getpid()
    if sys.platform.startswith("linux"):
        found = set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            pid, ppid, pgid = int(entry.name), int(fields[1]), int(fields[2])
            if ppid == me and pgid == pid and fields[0] != b"Z":
                found.add(pid)
        return found
    try:
        listing = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,pgid="], capture_output=True, text=True,
                                 timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    rows = (line.split() for line in listing.splitlines())
    return {int(pid) for pid, ppid, pgid in (r for r in rows if len(r) == 3)
            if int(ppid) == me and pgid == pid}


@contextlib.contextmanager
def noting_children() -> Iterator[None]:
    """Note every group-leading child that appears while the block runs (a session start)."""
    if not hasattr(os, "killpg"):
        yield
        return
    before = children()
    try:
        yield
    finally:
        # Looked at under the lock: with a look taken before it, a session start that finished
        # meanwhile in another worker was noted by that worker, then dropped here as closed,
        # and its target outlived an interrupted run.
        with _LOCK:
            now = children()
            _GROUPS.intersection_update(now)   # groups whose sessions closed are gone
            _GROUPS.update(now - before)


def stop_all(grace: float = 2.0) -> int:
    """SIGTERM each noted group still led by our child, SIGKILL what remains after ``grace``;
    how many groups were signalled. A pid that is no longer our child is never signalled."""
    with _LOCK:
        live = _GROUPS & children()
        _GROUPS.clear()
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in live:
            with contextlib.suppress(OSError):
                os.killpg(pid, signum)
        end = time.monotonic() + grace
        while signum == signal.SIGTERM and time.monotonic() < end and live & children():
            time.sleep(0.05)
    return len(live)

"""The search index's array work, done in short-lived helper processes so the server never loads numpy.

Building a large index's postings (:mod:`postings_build`) and signing its bodies
(:mod:`boundary_signing`) need array code; numpy costs an OKF server 15 MiB of resident memory
for the rest of its life once imported, and a build's temporaries leave the server's allocator
pools fragmented (databricks-okf: a pure-Python build left the read tools at 110.7 MiB, this
one at 100.1). A helper (``python -P -m`` this module, 0.1-0.2 s to start) imports numpy
instead, reads the bodies (sent as they are folded, or from the index's nameless file, whose
descriptor it inherits), does the job and writes back flat buffers; its memory is gone with it.
A large index's postings take two helpers (:class:`PostingsJob`), so the tokenising runs on
both cores while the server folds: 50,000 concepts are built in 1.4-1.7 s, as fast as numpy in
the server did (``knowspec bench okf-cold``).

Where a helper cannot run (no interpreter to start, a failure, past ``TIMEOUT_SECONDS``), its
result is None and the index does without: it builds its postings in process (pure Python) and
goes without signatures (every candidate body is then verified; the same answers).

Protocol, both ends being this module: on the helper's stdin a pickled ``(job, header)``, then
the job's pickled messages, then ``_END``; on its stdout the pickled result.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import time
from array import array
from collections import deque
from typing import Any, Callable, Iterator

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 600.0
POLL_SECONDS = 0.25  # how often a running helper lets the call be cancelled


class Helper:
    """One job in a helper process: started with its header, fed messages (a large index's
    bodies, as they are folded), then asked for the result. Any failure makes :meth:`result`
    None (logged once); sending after one is a no-op."""

    def __init__(self, job: str, process: subprocess.Popen | None) -> None:
        self.job, self.process = job, process
        self.ended = False  # _END sent: nothing more comes

    @classmethod
    def start(cls, job: str, header: dict[str, Any], pass_fds: tuple[int, ...] = ()) -> "Helper":
        """The helper started on ``job``; ``pass_fds``: descriptors it inherits (besides the
        bodies' file a header names)."""
        fileno = header.get("bodies", {}).get("fileno")
        if not sys.executable:
            log.warning("no Python interpreter to start the search index helper for %s", job)
            return cls(job, None)
        try:
            # -P: the working folder is not put on the helper's path, so a ``knowspec`` folder
            # there is never imported in place of this package
            process = subprocess.Popen([sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       pass_fds=(*pass_fds, *(() if fileno is None else (fileno,))))
        except (OSError, ValueError) as error:  # ValueError: a platform without pass_fds
            log.warning("could not start the search index helper for %s (%s)", job, error)
            return cls(job, None)
        helper = cls(job, process)
        helper.send((job, header))
        return helper

    def send(self, message: Any) -> None:
        if self.process is None or self.process.stdin is None:
            return
        try:
            self.process.stdin.write(pickle.dumps(message, protocol=5))
            self.process.stdin.flush()  # whole messages only: a helper must never wait on a part kept here
        except OSError:  # the helper died: its exit tells why, in result()
            self.process.stdin = None

    def end(self) -> None:
        """Tell the helper its messages are all sent (once)."""
        if not self.ended:
            self.send(_END)
            self.ended = True

    def result(self, check_cancelled: Callable[[], None] = lambda: None) -> Any | None:
        if self.process is None:
            return None
        self.end()
        out, err = _communicate(self.process, check_cancelled)
        if out is None or self.process.returncode != 0:
            tail = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:] or ["timed out"]
            log.warning("the search index helper failed at %s (exit %s: %s)", self.job, self.process.returncode, tail[0])
            return None
        try:
            return pickle.loads(out)
        except (pickle.UnpicklingError, EOFError, ValueError) as error:
            log.warning("the search index helper's answer to %s was unreadable (%s)", self.job, error)
            return None

    def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            _stop(self.process)


class PostingsJob:
    """A large index's postings built by two helpers at once: ``postings_part`` builds the short
    fields' and tokenises half the bodies, handing their tokens to ``postings`` through a pipe of
    their own; ``postings`` tokenises the other half and builds the bodies'. :meth:`send_bodies`
    alternates between them. Either failing makes :meth:`result` None."""

    def __init__(self, n_rows: int) -> None:
        read_end, write_end = os.pipe()
        try:
            self.part = Helper.start("postings_part", {"n_rows": n_rows, "partial_fd": write_end}, (write_end,))
            partial = read_end if self.part.process is not None else None
            self.main = Helper.start("postings", {"n_rows": n_rows, "partial_fd": partial},
                                     (read_end,) if partial is not None else ())
        finally:
            os.close(read_end)
            os.close(write_end)
        self.helpers = [self.part, self.main] if self.part.process is not None else [self.main]
        self.sent = 0

    def send_fields(self, blobs: list[dict[str, bytes]]) -> None:
        self.helpers[0].send(("fields", blobs))

    def send_bodies(self, rows: list[int], stored: list[bytes]) -> None:
        self.helpers[self.sent % len(self.helpers)].send(("bodies", rows, stored))
        self.sent += 1

    def result(self, check_cancelled: Callable[[], None] = lambda: None) -> list[dict[str, bytes]] | None:
        """Every field kind's buffers, the bodies' last; None if a helper failed."""
        for helper in self.helpers:
            helper.end()  # both first: the main helper waits on the part's tokens
        built = self.main.result(check_cancelled)
        fields = [] if len(self.helpers) == 1 else self.part.result(check_cancelled)
        return None if built is None or fields is None else [*fields, *built]

    def stop(self) -> None:
        for helper in self.helpers:
            helper.stop()


def run(job: str, header: dict[str, Any], check_cancelled: Callable[[], None] = lambda: None) -> Any | None:
    """The result of ``job`` done by a helper process; None when none could do it (logged)."""
    return Helper.start(job, header).result(check_cancelled)


def _communicate(helper: subprocess.Popen,
                 check_cancelled: Callable[[], None]) -> tuple[bytes | None, bytes | None]:
    """The helper's (stdout, stderr), its stdin closed; (None, None) past the deadline. A
    cancelled call kills it."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        try:
            return helper.communicate(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        except (OSError, ValueError):  # its stdin broke: the exit tells why
            helper.stdin = None
            continue
        try:
            check_cancelled()
        except BaseException:
            _stop(helper)
            raise
        if time.monotonic() > deadline:
            _stop(helper)
            return None, None


def _stop(helper: subprocess.Popen) -> None:
    helper.kill()
    helper.communicate()


def field_values(field: dict[str, bytes]) -> tuple[array, list[bytes]]:
    """(owner rows, values) of a short field sent as its blob (values joined by NUL)."""
    starts, owners = array("q"), array("q")
    starts.frombytes(field["starts"])
    owners.frombytes(field["owners"])
    data = field["data"]
    ends = [start - 1 for start in starts[1:]] + [len(data)]
    return owners, [data[start:end] for start, end in zip(starts, ends)]


def _sign(header: dict[str, Any], messages: Iterator[Any]) -> bytes:
    from knowspec.impl.okf.search import boundary_signing

    deque(messages, maxlen=0)
    from knowspec.impl.okf.search.folded_bodies import FoldedBodies

    return boundary_signing.sign(FoldedBodies.reader(**header["bodies"]))


def _received_bodies(messages: Iterator[Any], fields: list[dict[str, bytes]], n_rows: int
                     ) -> Iterator[tuple[int, bytes]]:
    """(row, body) of each ``("bodies", rows, stored bodies)`` message; the postings of a
    ``("fields", blobs)`` message are built as it comes, into ``fields``."""
    import lz4.block

    from knowspec.impl.okf.search import postings_build

    for kind, *data in messages:
        if kind == "bodies":
            yield from zip(data[0], map(lz4.block.decompress, data[1]))
        elif kind == "fields":
            fields.extend(postings_build.build_values(n_rows, *field_values(blob)) for blob in data[0])


def _postings(header: dict[str, Any], messages: Iterator[Any]) -> list[dict[str, bytes]]:
    """Messages: ``("fields", [short field blobs])`` (unless a ``postings_part`` helper took
    them), ``("bodies", rows, stored bodies)`` (any row order, each row once). With
    ``partial_fd`` in the header, that helper's tokens of the other bodies come through it.
    The buffers of the fields sent here, then the bodies'."""
    from knowspec.impl.okf.search import postings_build

    fields: list[dict[str, bytes]] = []
    found = postings_build.body_tokens(_received_bodies(messages, fields, header["n_rows"]))
    if header.get("partial_fd") is not None:
        with os.fdopen(header["partial_fd"], "rb") as partial:
            vocabulary, keys = pickle.load(partial)
        found.merge(vocabulary, keys)
    return [*fields, found.postings(header["n_rows"])]


def _postings_part(header: dict[str, Any], messages: Iterator[Any]) -> list[dict[str, bytes]]:
    """The other half of a large index's bodies (two helpers tokenise them at once): their
    tokens written to ``partial_fd`` for the ``postings`` helper to merge. The buffers of the
    fields sent here (it builds them while the other builds the merged bodies')."""
    from knowspec.impl.okf.search import postings_build

    fields: list[dict[str, bytes]] = []
    found = postings_build.body_tokens(_received_bodies(messages, fields, header["n_rows"]))
    with os.fdopen(header["partial_fd"], "wb") as partial:
        pickle.dump(found.partial(), partial, protocol=5)
    return fields


JOBS: dict[str, Callable[[dict[str, Any], Iterator[Any]], Any]] = {
    "sign": _sign, "postings": _postings, "postings_part": _postings_part}
_END = ("end",)


def main() -> None:
    from knowspec.impl.server.native_memory import keep_freed_memory

    keep_freed_memory()
    stdin = sys.stdin.buffer
    job, header = pickle.load(stdin)
    messages = iter(lambda: pickle.load(stdin), _END)
    pickle.dump(JOBS[job](header, messages), sys.stdout.buffer, protocol=5)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()

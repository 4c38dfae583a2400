"""Pool files written beside their place (impl/docpool/storage/staging.py): what a dead writer
left is removed by the next writer of the same pool, a running writer's never."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knowspec.impl.docpool.recipe import import_collection
from knowspec.impl.docpool.storage.staging import GRACE_SECONDS, staged, sweep_dead_staging

from test_import_pools import make_pool, topics_of

DEAD_WRITER = """
import sqlite3, sys, time
from pathlib import Path
from knowspec.impl.docpool.storage.staging import staged
with staged(Path(sys.argv[1]), "importing") as staging:
    con = sqlite3.connect(staging)
    con.execute("pragma journal_mode = wal")
    con.execute("create table t(x)")
    con.execute("insert into t values (1)")
    print(staging.name, flush=True)
    time.sleep(60)
"""


def _backdate(path: Path, seconds: float = GRACE_SECONDS + 1) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def _stagings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _killed_writer(target: Path) -> str:
    """A writer that dies by SIGKILL inside ``staged``: its staging file, WAL and lock stay."""
    proc = subprocess.Popen([sys.executable, "-c", DEAD_WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    name = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    return name


def test_a_killed_first_import_leaves_nothing_once_the_next_import_runs(tmp_path):
    target = tmp_path / "sales.db"
    name = _killed_writer(target)
    assert {name, name + ".lock", name + "-wal"} <= set(_stagings(tmp_path))
    _backdate(tmp_path / (name + ".lock"))
    import_collection(target, make_pool(tmp_path / "src.db", "manuals", topics_of(2)), "manuals")
    assert _stagings(tmp_path) == []
    with sqlite3.connect(target) as con:
        assert con.execute('select count(*) from "doc$topic"').fetchone()[0] == 2


def test_a_running_writers_staging_is_kept_however_old(tmp_path):
    target = tmp_path / "sales.db"
    with staged(target, "building") as staging:
        sqlite3.connect(staging).close()
        staging.touch()
        _backdate(staging.with_name(staging.name + ".lock"))
        assert sweep_dead_staging(target) == []
        assert staging.exists()
    assert _stagings(tmp_path) == []


def test_a_free_lock_younger_than_the_grace_is_not_taken_for_a_dead_writers(tmp_path):
    """A writer creates its lock file an instant before it locks it."""
    target = tmp_path / "sales.db"
    name = _killed_writer(target)
    assert sweep_dead_staging(target) == []
    assert name in _stagings(tmp_path)
    assert sweep_dead_staging(target, grace=0) == [name]
    assert _stagings(tmp_path) == []


def test_a_dead_writers_second_name_of_the_pool_goes_and_the_pool_stays(tmp_path):
    """Killed after linking its pool into place, before removing its own name."""
    target = make_pool(tmp_path / "sales.db", "manuals", topics_of(3))
    second = tmp_path / ".sales.db.4242-0a1b2c3d.importing"
    os.link(target, second)
    (tmp_path / (second.name + ".lock")).touch()
    assert sweep_dead_staging(target, grace=0) == [second.name]
    assert _stagings(tmp_path) == []
    with sqlite3.connect(target) as con:
        assert con.execute('select count(*) from "doc$topic"').fetchone()[0] == 3


def test_a_lock_whose_file_is_gone_and_a_file_without_a_lock_are_swept(tmp_path):
    target = tmp_path / "sales.db"
    (tmp_path / ".sales.db.17-00000000.importing.lock").touch()
    (tmp_path / ".sales.db.18-11111111.building").touch()
    assert sweep_dead_staging(target, grace=0) == [".sales.db.17-00000000.importing", ".sales.db.18-11111111.building"]
    assert _stagings(tmp_path) == []


def test_only_this_pools_staging_names_are_touched(tmp_path):
    kept = [".other.db.17-00000000.importing", ".sales.db.17-0000000.importing", ".sales.db.x-00000000.importing",
            ".sales.db.bak", ".sales.db.17-00000000.importing.old"]
    for name in kept:
        (tmp_path / name).touch()
    assert sweep_dead_staging(tmp_path / "sales.db", grace=0) == []
    assert _stagings(tmp_path) == sorted(kept)


def test_without_hard_links_a_first_import_waits_for_another_placing_its_pool_and_joins_it(tmp_path, monkeypatch):
    """The rename that replaces a hard link is not exclusive: two first imports checking that no
    pool exists, then renaming, had left only the second's pool (the first's collection lost)."""
    import fcntl
    import threading

    from knowspec.impl.docpool.storage import staging as staging_module

    def no_hard_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(staging_module.os, "link", no_hard_links)
    target = tmp_path / "sales.db"
    placing = os.open(tmp_path / ".sales.db.placing.lock", os.O_WRONLY | os.O_CREAT)
    fcntl.flock(placing, fcntl.LOCK_EX)  # another first import is placing its pool
    done: list = []
    importer = threading.Thread(target=lambda: done.append(
        import_collection(target, make_pool(tmp_path / "src.db", "manuals", topics_of(3)), "manuals")))
    importer.start()
    importer.join(0.5)
    assert importer.is_alive() and not target.exists()
    make_pool(target, "faq", topics_of(2, "q"))  # the other import's pool takes the name
    os.close(placing)
    importer.join(10)
    with sqlite3.connect(target) as con:
        assert con.execute('select collection, count(*) from "doc$topic" group by 1 order by 1').fetchall() == [
            ("faq", 2), ("manuals", 3)]
    assert done and done[0].topics == 3


def test_without_hard_links_a_first_import_renames_its_pool_into_place(tmp_path, monkeypatch):
    from knowspec.impl.docpool.storage import staging as staging_module

    monkeypatch.setattr(staging_module.os, "link", lambda src, dst: (_ for _ in ()).throw(PermissionError(1, "no")))
    target = tmp_path / "sales.db"
    import_collection(target, make_pool(tmp_path / "src.db", "manuals", topics_of(2)), "manuals")
    with sqlite3.connect(target) as con:
        assert con.execute('select count(*) from "doc$topic"').fetchone()[0] == 2
    assert _stagings(tmp_path) == []  # the placing lock goes with its holder


def test_a_first_import_losing_the_race_leaves_the_winners_journal_alone(tmp_path, monkeypatch):
    """It had removed the -wal and -shm beside the name before placing its pool: a transaction
    the winner's pool held only in its WAL was gone for every reader."""
    from knowspec.impl.docpool import recipe

    target = tmp_path / "sales.db"
    real_place = recipe.link_into_place
    writer: list[sqlite3.Connection] = []

    def placed_after_another_import_wrote(staging, path):
        monkeypatch.setattr(recipe, "link_into_place", real_place)
        import_collection(path, make_pool(tmp_path / "faq.db", "faq", topics_of(2, "q")), "faq")
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("pragma journal_mode = wal")
        con.execute("pragma wal_autocheckpoint = 0")
        con.execute('update "doc$topic" set title = \'in the WAL only\' where collection = \'faq\'')
        writer.append(con)  # open, so its WAL is not folded in
        return real_place(staging, path)

    monkeypatch.setattr(recipe, "link_into_place", placed_after_another_import_wrote)
    import_collection(target, make_pool(tmp_path / "src.db", "manuals", topics_of(3)), "manuals")
    with sqlite3.connect(target) as con:
        assert con.execute('select count(*) from "doc$topic" where title = \'in the WAL only\'').fetchone()[0] == 2
        assert con.execute('select count(*) from "doc$topic" where collection = \'manuals\'').fetchone()[0] == 3
    writer[0].close()


def test_an_import_into_an_existing_pool_sweeps_a_dead_writers_files(tmp_path):
    """A killed first import retried at once (its lock too young to judge) left its pool-sized
    file for good: only first imports and builds swept."""
    target = make_pool(tmp_path / "sales.db", "faq", topics_of(2, "q"))
    name = _killed_writer(target)
    _backdate(tmp_path / (name + ".lock"))
    import_collection(target, make_pool(tmp_path / "src.db", "manuals", topics_of(2)), "manuals")
    assert _stagings(tmp_path) == []


def test_a_pool_path_that_is_a_link_to_nothing_is_refused(tmp_path):
    """Each pass had found no pool there, imported it whole beside it, failed to link and
    joined, until the recursion limit (490 full imports)."""
    from knowspec.impl.docpool.recipe import ImportRefused

    target = tmp_path / "sales.db"
    target.symlink_to(tmp_path / "gone" / "pool.db")
    with pytest.raises(ImportRefused, match="sales.db is a symbolic link to nothing"):
        import_collection(target, make_pool(tmp_path / "src.db", "manuals", topics_of(2)), "manuals")


def test_a_pool_a_first_import_makes_is_readable_by_its_owner_alone(tmp_path):
    """Its topics may be restricted by ACLs; the file had taken the umask's 0644, so any local
    user could read what the server withholds."""
    import stat as stat_module

    target = tmp_path / "sales.db"
    import_collection(target, make_pool(tmp_path / "src.db", "manuals", topics_of(2)), "manuals")
    assert stat_module.S_IMODE(target.stat().st_mode) == 0o600
    target.chmod(0o640)  # the operator's choice for a pool that exists stays
    import_collection(target, make_pool(tmp_path / "faq.db", "faq", topics_of(2, "q")), "faq")
    assert stat_module.S_IMODE(target.stat().st_mode) == 0o640

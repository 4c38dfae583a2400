"""The help pool is public by design: a build refuses a restricted marker that nothing would apply."""

from __future__ import annotations

import pytest

from knowspec.impl.cli import main
from knowspec.impl.demo import EXAMPLES


@pytest.mark.parametrize(("out_name", "collection"), [("help.db", "my-help"), ("pool.db", "netsim-help")])
def test_a_restricted_marker_on_the_help_pool_is_refused_with_exit_2(tmp_path, capsys, out_name, collection):
    out = tmp_path / out_name
    code = main(["pool", "build", str(EXAMPLES / "help"), str(out), "--collection", collection,
                 "--erisim", "kisitli"])
    assert code == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "help pool" in err and "public" in err and "kisitli" in err


def test_a_restricted_collection_in_pool_yaml_is_refused_for_the_help_pool(tmp_path, capsys):
    source = tmp_path / "src"
    (source / "topics").mkdir(parents=True)
    (source / "topics" / "a.md").write_text("---\nslug: a\ntitle: A\n---\nbody\n", encoding="utf-8")
    (source / "pool.yaml").write_text("collections:\n  - id: secret\n    erisim: kisitli\n", encoding="utf-8")
    assert main(["pool", "build", str(source), str(tmp_path / "help.db"), "--collection", "netsim-help"]) == 2
    assert "collection secret" in capsys.readouterr().err


def test_document_pools_and_a_public_help_pool_still_build(tmp_path):
    assert main(["pool", "build", str(EXAMPLES / "help"), str(tmp_path / "docs.db"), "--collection", "private-docs",
                 "--erisim", "kisitli"]) == 0
    assert main(["pool", "build", str(EXAMPLES / "help"), str(tmp_path / "help.db"),
                 "--collection", "netsim-help"]) == 0


def test_a_build_says_when_topic_acls_restrict_nothing_in_a_collection_open_to_everyone(tmp_path, capsys):
    """The demo's help corpus holds a topic with ``acl: [Muhasebe]``: in a public collection every
    caller may read it (the seed's rule), and the build now says so."""
    assert main(["pool", "build", str(EXAMPLES / "help"), str(tmp_path / "help.db"), "--collection", "netsim-help"]) == 0
    err = capsys.readouterr().err
    assert "collection netsim-help is open to everyone" in err and "restricts nothing" in err
    assert main(["pool", "build", str(EXAMPLES / "help"), str(tmp_path / "docs.db"), "--collection", "private-docs",
                 "--erisim", "kisitli"]) == 0
    assert "restricts nothing" not in capsys.readouterr().err


def _restricted_source(tmp_path):
    """The sample help folder with its pool.yaml giving the main collection a restricted marker."""
    import shutil

    source = tmp_path / "restricted"
    shutil.copytree(EXAMPLES / "help", source)
    yaml = source / "pool.yaml"
    yaml.write_text(yaml.read_text(encoding="utf-8").replace("erisim: herkes", "erisim: kisitli", 1), encoding="utf-8")
    return source


def _erisim(pool, collection):
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(pool)) as con:
        return con.execute('select erisim from "doc$collection" where id = ?', [collection]).fetchone()[0]


def test_pool_yaml_erisim_applies_when_no_erisim_is_given(tmp_path, capsys):
    """A stranger's build of a folder whose pool.yaml restricts its collection had made it public
    (the option's default, ``herkes``, always won): every caller read its restricted topics."""
    source = _restricted_source(tmp_path)
    assert main(["pool", "build", str(source), str(tmp_path / "docs.db"), "--collection", "secret-docs"]) == 0
    assert _erisim(tmp_path / "docs.db", "secret-docs") == "kisitli"
    assert "restricts nothing" not in capsys.readouterr().err
    assert main(["pool", "build", str(source), str(tmp_path / "open.db"), "--collection", "open-docs",
                 "--erisim", "herkes"]) == 0
    assert _erisim(tmp_path / "open.db", "open-docs") == "herkes"  # the option, when given, wins


def test_a_restricted_main_collection_in_pool_yaml_is_refused_for_the_help_pool(tmp_path, capsys):
    source = _restricted_source(tmp_path)
    assert main(["pool", "build", str(source), str(tmp_path / "help.db"), "--collection", "netsim-help"]) == 2
    assert "the collection in pool.yaml" in capsys.readouterr().err and not (tmp_path / "help.db").exists()

"""`knowspec pool register|alter|databases`: the catalog from the command line."""

from __future__ import annotations

import json

from knowspec.impl.cli import main


def run(capsys, *argv) -> tuple[int, list[dict]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.strip()]


def test_register_then_set_documents_internal(tmp_path, capsys):
    code, rows = run(capsys, "pool", "register", "shop", "--storage", "sqlite", "--dsn", str(tmp_path / "s.db"),
                     "--appdir", str(tmp_path))
    assert code == 0 and rows[0]["storage"] == "SQLITE"
    code, rows = run(capsys, "pool", "alter", "alter database shop set documents internal", "--appdir", str(tmp_path))
    assert code == 0 and rows[0]["documents"] == "INTERNAL"
    code, rows = run(capsys, "pool", "databases", "--appdir", str(tmp_path))
    assert [r["name"] for r in rows] == ["shop"]


def test_alter_of_an_unknown_database_fails_cleanly(tmp_path, capsys):
    code, rows = run(capsys, "pool", "alter", "ALTER DATABASE nope SET DOCUMENTS OFF", "--appdir", str(tmp_path))
    assert code == 2 and rows == []


def test_alter_rejects_other_statements(tmp_path, capsys):
    code, _ = run(capsys, "pool", "alter", "DROP DATABASE shop", "--appdir", str(tmp_path))
    assert code == 2


def test_listing_an_empty_catalog_says_so_on_stderr(tmp_path, capsys):
    code = main(["pool", "databases", "--appdir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0 and out == ""  # stdout stays a (here empty) list of JSON lines
    assert "no database is registered" in err

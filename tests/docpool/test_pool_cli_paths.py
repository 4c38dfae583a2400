"""The pool commands chain through APPDIR: a bare file name is a file there."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, strategies as st

from knowspec.impl.cli import main
from knowspec.impl.config import Settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
names = st.text(st.sampled_from("abcxyz-_."), min_size=1, max_size=8).filter(lambda n: n not in {".", ".."})


@given(names)
def test_a_bare_name_is_in_appdir_and_a_path_with_a_folder_is_as_given(name):
    settings = Settings(appdir=Path("/srv/app"))
    assert settings.in_appdir(name) == Path("/srv/app") / name
    assert settings.in_appdir(f"sub/{name}") == Path(f"sub/{name}").absolute()
    assert settings.in_appdir(f"/abs/{name}") == Path(f"/abs/{name}")


def test_build_register_and_import_chain_with_bare_names(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    app = ["--appdir", str(tmp_path / "app")]
    assert main(["pool", "build", str(EXAMPLES / "help"), "help.db", "--collection", "netsim-help", *app]) == 0
    assert main(["pool", "build", str(EXAMPLES / "help"), "pool.db", "--collection", "docs", *app]) == 0
    assert main(["pool", "register", "shop", "--storage", "SQLITE", "--dsn", "shop.db", *app]) == 0
    assert main(["pool", "alter", "ALTER DATABASE shop SET DOCUMENTS INTERNAL", *app]) == 0
    assert main(["pool", "import", "--database", "shop", "--collection", "docs", "pool.db", *app]) == 0
    assert {p.name for p in (tmp_path / "app").iterdir()} >= {"help.db", "pool.db", "shop.db", "catalog.db"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app"]  # nothing landed in the current folder
    assert f'"dsn": "{tmp_path / "app" / "shop.db"}"' in capsys.readouterr().out


def test_pool_build_model_without_a_folder_uses_the_default_pack(tmp_path, capsys):
    code = main(["pool", "build", str(EXAMPLES / "help"), "h.db", "--collection", "h", "--model",
                 "--appdir", str(tmp_path)])
    assert code == 1  # no pack there yet: the message names where it looked
    assert str(tmp_path / "models" / "e5-int8") in capsys.readouterr().err

"""A refused import is decided read-only: the target stays byte-identical (the seed's 202)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from knowspec.impl.docpool import recipe
from knowspec.impl.docpool.builder import build_pool

HELP = Path(__file__).resolve().parents[2] / "examples" / "help"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def add_topic_vectors(pool: Path, dim: int) -> None:
    with sqlite3.connect(pool) as con:
        for (topic_id,) in con.execute('select id from "doc$topic"').fetchall():
            con.execute('insert into "doc$topic_vec"(topic_id, vec) values (?, ?)',
                        [topic_id, np.ones(dim, dtype="<f4").tobytes()])


@pytest.fixture()
def pools(tmp_path):
    target, source = tmp_path / "target.db", tmp_path / "source.db"
    build_pool(HELP, target, "other")
    build_pool(HELP, source, "docs")
    return target, source


def test_vector_dimension_conflict_is_refused_without_touching_the_target(pools):
    target, source = pools
    add_topic_vectors(target, 4)
    add_topic_vectors(source, 8)
    before = digest(target)
    with pytest.raises(recipe.ImportRefused, match="embedding model does not match"):
        recipe.import_collection(target, source, "docs")
    assert digest(target) == before
    assert not Path(str(target) + "-wal").exists()


@pytest.mark.parametrize("name", ["docs\n", "Docs", "-docs", "docs/x", ""])
def test_invalid_collection_names_are_refused_whole(pools, name):
    target, source = pools
    before = digest(target)
    with pytest.raises(recipe.ImportRefused, match="invalid collection name"):
        recipe.import_collection(target, source, name)
    assert digest(target) == before


def test_missing_collection_leaves_the_target_alone(pools):
    target, source = pools
    before = digest(target)
    with pytest.raises(recipe.ImportRefused, match="not found in source"):
        recipe.import_collection(target, source, "nope")
    assert digest(target) == before


def test_accepted_import_still_replaces_the_collection(pools):
    target, source = pools
    result = recipe.import_collection(target, source, "docs")
    assert result.topics == 20

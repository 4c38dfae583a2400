"""The storage seam: storages return data (rows, postings, vectors); ranking lives in the search layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STORAGE = Path(__file__).resolve().parents[2] / "impl" / "docpool" / "storage"
RANKING = ("knowspec.impl.rules.bm25", "knowspec.impl.rules.rrf", "knowspec.impl.docpool.fulltext.rank",
           "knowspec.impl.docpool.fulltext.snippet", "knowspec.impl.docpool.fulltext.search",
           "knowspec.impl.docpool.vectors.scoring", "knowspec.impl.docpool.search")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("module", sorted(p.name for p in STORAGE.glob("*.py")))
def test_a_storage_module_imports_no_ranking(module):
    found = {m for m in _imports(STORAGE / module) for r in RANKING if m == r or m.startswith(r + ".")}
    assert not found, f"storage/{module} imports ranking: {sorted(found)}"


def test_the_check_sees_a_ranking_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from knowspec.impl.docpool.fulltext import rank\n", "utf-8")
    assert "knowspec.impl.docpool.fulltext.rank" in _imports(probe)

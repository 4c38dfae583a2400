"""doc_entities lists entities by kind, key byte-wise, collection (the contract's ordering):
lookups by key are case-insensitive, the order is not."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.storage.sqlite import SqlitePool

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "help"


def test_entities_are_listed_by_key_byte_wise_not_case_insensitively(tmp_path):
    source = tmp_path / "help"
    shutil.copytree(SAMPLE, source)
    config = yaml.safe_load((source / "pool.yaml").read_text("utf-8"))
    # byte-wise "TfrmCF..." < "TfrmCa..." ('F' < 'a'); case-insensitively "tfrmca..." < "tfrmcf..."
    config["entities"].append({"kind": "form_class", "key": "TfrmCF57Banka", "title": "Banka"})
    (source / "pool.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    build_pool(source, tmp_path / "pool.db", "help", title="Help", erisim="herkes")
    with SqlitePool(tmp_path / "pool.db") as pool:
        keys = [e.key for e in pool.find_entities("form_class", None, 200)]
    assert keys == sorted(keys, key=lambda k: k.encode("utf-8"))
    assert keys.index("TfrmCF57Banka") < keys.index("TfrmCariKart")

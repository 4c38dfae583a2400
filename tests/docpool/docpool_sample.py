"""Sample pools for the help_* / doc_* tests (not a test module).

``make_env`` builds, under a temporary folder: the help pool from ``examples/help`` and a
document pool for database ``sales`` (catalog entry, SET DOCUMENTS INTERNAL) holding two
collections: ``ic-belgeler`` (the same sample, erisim 'kisitli': ACLs apply) and ``genel``
(two small topics, erisim 'herkes').
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext, Caller
from knowspec.impl.docpool import catalog, tools
from knowspec.impl.docpool.builder import build_pool, split_frontmatter
from knowspec.impl.docpool.recipe import import_collection
from tool_args import tool_args

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "help"
SCHEMAS = REPO / "spec" / "docpool" / "schemas"
RESTRICTED = "ic-belgeler"
PUBLIC = "genel"

GENEL_TOPICS = {
    "genel-duyuru.md": "---\nslug: genel-duyuru\ntitle: Bordro dönemi duyurusu\nbreadcrumb: Duyurular\n"
                       "---\n# Bordro dönemi duyurusu\n\nBordro kesim tarihi ayın 25'idir.\n",
    "tatil-takvimi.md": "---\nslug: tatil-takvimi\ntitle: Tatil takvimi\nbreadcrumb: Duyurular\n"
                        "---\n# Tatil takvimi\n\nResmî tatiller ve idari izin günleri.\n",
}


@dataclass
class Env:
    root: Path
    settings: Settings

    def ctx(self, caller: Caller | None = None) -> CallContext:
        return CallContext(caller=caller or Caller(), settings=self.settings)


def make_env(root: Path) -> Env:
    settings = Settings(appdir=root)
    build_pool(SAMPLE, settings.help_db_path, "netsim-help", title="Netsim Yardım", erisim="herkes")
    src = root / "src"
    src.mkdir()
    build_pool(SAMPLE, src / "restricted.db", RESTRICTED, title="İç belgeler", erisim="kisitli")
    genel = root / "genel"
    genel.mkdir()
    for name, text in GENEL_TOPICS.items():
        (genel / name).write_text(text, "utf-8")
    build_pool(genel, src / "genel.db", PUBLIC, title="Genel", erisim="herkes")
    pool_file = root / "sales.db"
    catalog.register_database(settings.catalog_path, "sales", "SQLITE", str(pool_file))
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    import_collection(pool_file, src / "restricted.db", RESTRICTED)
    import_collection(pool_file, src / "genel.db", PUBLIC)
    settings.default_database = "sales"
    return Env(root, settings)


def call(tool: str, ctx: CallContext, **kwargs: Any) -> Any:
    """Call a handler with the input model the pipeline would build; unwrap ``results``."""
    out = getattr(tools, tool)(tool_args(tool, **kwargs), ctx).structured
    return out["results"] if set(out) == {"results"} else out


def sample_topics() -> dict[str, dict[str, Any]]:
    """slug -> frontmatter of every sample topic (the oracle the ACL tests compare with)."""
    out = {}
    for path in sorted((SAMPLE / "topics").glob("*.md")):
        front, _ = split_frontmatter(path.read_text("utf-8"))
        out[front["slug"]] = front
    return out


def sample_config() -> dict[str, Any]:
    return yaml.safe_load((SAMPLE / "pool.yaml").read_text("utf-8"))

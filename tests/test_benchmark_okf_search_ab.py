"""How ``benchmarks/okf_search_ab.py`` puts a revision's module in place of today's and times the two."""

from __future__ import annotations

import sys
import time
import types
from contextlib import contextmanager

import pytest

from benchmark_modules import import_benchmark

okf_search_ab = import_benchmark("okf_search_ab")

TODAY = '''
from dataclasses import dataclass

LIMIT = 2

def cap(n):
    return min(n, LIMIT)

@dataclass(slots=True)
class Box:
    n: int

    def doubled(self):
        return cap(self.n) * 2
'''

BEFORE = TODAY.replace("LIMIT = 2", "LIMIT = 10").replace("return cap(self.n) * 2", "return cap(self.n) * 3")


@pytest.fixture
def today():
    module = types.ModuleType("ab_probe_today")
    sys.modules[module.__name__] = module
    exec(TODAY, module.__dict__)
    yield module
    sys.modules.pop(module.__name__, None)
    sys.modules.pop(module.__name__ + "__before", None)


def test_objects_built_today_answer_through_the_revisions_functions_and_methods_while_swapped(today):
    box = today.Box(5)
    swaps = okf_search_ab.replacements(today, okf_search_ab.module_at(BEFORE, today))
    with okf_search_ab.swapped(swaps):
        assert today.cap(5) == 5  # the revision's function reads the revision's constant
        assert box.doubled() == 15
    assert today.cap(5) == 2 and box.doubled() == 4  # everything put back


def test_the_two_sides_are_timed_in_turns_and_must_agree(today):
    swaps = okf_search_ab.replacements(today, okf_search_ab.module_at(BEFORE, today))
    same = okf_search_ab.alternated(4, lambda: today.cap(1), lambda: today.cap(1), lambda: okf_search_ab.swapped(swaps))
    assert set(same) == {"before_ms", "after_ms", "ratio"} and same["before_ms"] >= 0
    with pytest.raises(SystemExit, match="answered differently"):
        okf_search_ab.alternated(2, lambda: today.cap(5), lambda: today.cap(5), lambda: okf_search_ab.swapped(swaps))


def test_only_the_call_is_timed_not_putting_the_revision_in_place():
    @contextmanager
    def slow_swap():
        time.sleep(0.05)
        yield
        time.sleep(0.05)

    timed = okf_search_ab.alternated(2, lambda: 1, lambda: 1, slow_swap)
    assert timed["before_ms"] < 25

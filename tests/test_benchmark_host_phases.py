"""The rule ``benchmarks/host_phases.py`` sorts its rounds by, and the yardstick it uses."""

from __future__ import annotations

from benchmark_modules import import_benchmark

host_phases = import_benchmark("host_phases")
import common  # noqa: E402


def rows(*triples: tuple[float, float, float]) -> list[dict[str, float]]:
    return [{"yardstick_ms": y, "embedding_ms": e, "ranking_ms": r} for y, e, r in triples]


def test_rounds_at_least_the_slow_factor_above_the_fastest_yardstick_are_slow():
    summary = host_phases.phase_summary(rows((7.0, 4.0, 4.5), (7.5, 4.2, 4.4), (12.0, 6.7, 7.5), (8.75, 5.0, 5.0)))
    assert (summary["fast_rounds"], summary["slow_rounds"]) == (2, 2)  # 8.75 = 1.25 x 7.0: slow
    assert summary["fast"] == {"yardstick_ms": 7.25, "embedding_ms": 4.1, "ranking_ms": 4.45}
    assert summary["slow"]["embedding_ms"] == 5.85


def test_parts_that_move_with_the_yardstick_correlate_with_it():
    summary = host_phases.phase_summary(rows((7.0, 4.0, 9.0), (12.0, 7.0, 9.0), (8.0, 4.6, 9.1), (11.0, 6.4, 9.1)))
    assert summary["correlation_with_yardstick"]["embedding_ms"] > 0.99
    assert summary["correlation_with_yardstick"]["ranking_ms"] == 0.0


def test_a_steady_host_has_no_slow_rounds_and_no_correlation():
    summary = host_phases.phase_summary(rows((7.0, 4.0, 4.5), (7.0, 4.1, 4.4)))
    assert summary["slow_rounds"] == 0 and summary["slow"]["embedding_ms"] is None
    assert summary["correlation_with_yardstick"] == {"embedding_ms": None, "ranking_ms": None}


def test_the_yardstick_is_a_positive_wall_time_in_milliseconds():
    assert 0 < common.yardstick_ms(repeats=1) < 10_000

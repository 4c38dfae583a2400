"""How ``benchmarks/okf_write.py`` sets a call against the one-file floor (issue 18, goal 2)."""

from __future__ import annotations

from benchmark_modules import import_benchmark

okf_write = import_benchmark("okf_write")


def test_the_goals_ratio_divides_by_the_floor_before_the_calls_the_floor_beside_them_reported_too():
    result = {"preview": {"p50_ms": 6.0}, "apply": {"p50_ms": 12.0}, "floor_beside": {"p50_ms": 1.5}}
    out = okf_write.ratios(result, floor_ms=0.5)
    assert out["preview"] == {"ratio_to_floor": 12.0, "bound": 20.0, "pass": True, "ratio_to_floor_beside": 4.0}
    assert out["apply"] == {"ratio_to_floor": 24.0, "bound": 20.0, "pass": False, "ratio_to_floor_beside": 8.0}


def test_a_floor_round_edits_and_replaces_its_file_each_time(tmp_path):
    floor = okf_write.Floor(tmp_path)
    first = floor.path.read_bytes()
    whole, edit = floor.round()
    assert 0 < edit <= whole
    second = floor.path.read_bytes()
    floor.round()
    assert first != second != floor.path.read_bytes()
    assert b"stale_after" in second and not (tmp_path / "floor" / ".n00000.md.tmp").exists()


def test_a_size_past_the_contracts_file_limit_starts_the_server_with_it_raised():
    assert okf_write.raised_limits(9990) == ()
    flags = okf_write.raised_limits(50000)
    assert flags[:2] == ("--max-bundle-files", "51000") and "--max-bundle-bytes" in flags

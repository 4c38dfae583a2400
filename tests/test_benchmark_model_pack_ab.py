"""How ``benchmarks/model_pack_ab.py --op-profile`` reads ONNX Runtime's profile."""

from __future__ import annotations

from benchmark_modules import import_benchmark

model_pack_ab = import_benchmark("model_pack_ab")


def run(ts: float) -> dict:
    return {"cat": "Session", "name": "model_run", "ts": ts, "dur": 90}


def kernel(op: str, ts: float, dur: float) -> dict:
    return {"cat": "Node", "name": f"{op}_node_kernel_time", "ts": ts, "dur": dur, "args": {"op_name": op}}


def test_kernel_time_is_summed_per_operator_and_divided_by_the_counted_runs():
    events = [run(0), kernel("Add", 1, 5), kernel("QAttention", 2, 60),
              run(100), kernel("Add", 101, 7), kernel("QAttention", 102, 62), kernel("Add", 103, 3),
              {"cat": "Node", "name": "Add_node_fence_before", "ts": 104, "dur": 1, "args": {"op_name": "Add"}}]
    by_op = model_pack_ab.kernel_time_by_op(events)
    assert list(by_op) == ["QAttention", "Add"]  # the costliest first
    assert by_op["QAttention"] == {"nodes_per_run": 1.0, "kernel_us_per_run": 61.0}
    assert by_op["Add"] == {"nodes_per_run": 1.5, "kernel_us_per_run": 7.5}  # fences are not kernel time


def test_the_warm_runs_are_left_out():
    events = [run(0), kernel("Add", 1, 500), run(100), kernel("Add", 101, 5), run(200), kernel("Add", 201, 7)]
    assert model_pack_ab.kernel_time_by_op(events, skip_runs=1)["Add"] == {"nodes_per_run": 1.0, "kernel_us_per_run": 6.0}
    assert model_pack_ab.kernel_time_by_op(events, skip_runs=3) == {}

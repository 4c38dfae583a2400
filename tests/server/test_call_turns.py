"""Tool calls over HTTP take turns at the handlers: at most so many run at once, and a freed turn
goes to the next caller in rotation, so one caller's backlog never stands before another's call
(40 cold graph calls at once had peaked at 2.5 GB on two cores)."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl.server.call_turns import CallTurns


def _run_calls(turns: CallTurns, arrivals: list[str], hold: float = 0.01) -> tuple[list[str], int]:
    """Start a call per key in ``arrivals`` (in that order, all before any ends); the order the
    calls got their turns, and the most that ran at once."""
    started: list[str] = []
    most = now = 0

    async def call(key: str) -> None:
        nonlocal most, now
        async with turns.turn(key):
            started.append(key)
            now += 1
            most = max(most, now)
            await anyio.sleep(hold)
            now -= 1

    async def go() -> None:
        async with anyio.create_task_group() as group:
            for key in arrivals:
                group.start_soon(call, key)
                await anyio.sleep(0)  # queued in arrival order

    anyio.run(go)
    return started, most


def test_a_caller_with_a_backlog_does_not_stand_before_another_callers_call():
    order, _ = _run_calls(CallTurns(2), ["a"] * 6 + ["b"])
    assert order.index("b") <= 3  # a, a run; b is next in rotation, not seventh


@settings(max_examples=40, deadline=None)
@given(capacity=st.integers(1, 4), arrivals=st.lists(st.sampled_from("abc"), max_size=12))
def test_at_most_capacity_calls_and_the_spare_run_and_every_call_gets_its_turn(capacity, arrivals):
    turns = CallTurns(capacity)
    order, most = _run_calls(turns, arrivals, hold=0)
    assert most <= capacity + 1 and sorted(order) == sorted(arrivals)  # the counted turns and the spare
    assert turns.running == 0 and not turns.spare_taken and not turns._waiting


def test_a_call_cancelled_while_waiting_leaves_no_turn_behind():
    turns = CallTurns(1)

    async def go() -> list[str]:
        ran: list[str] = []

        async def call(key: str) -> None:
            async with turns.turn(key):
                ran.append(key)
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as group:
            group.start_soon(call, "a")
            await anyio.sleep(0.01)
            with anyio.move_on_after(0.01):  # a's second call gives up while its first runs
                await call("a")
            group.start_soon(call, "c")
        return ran

    assert anyio.run(go) == ["a", "c"]
    assert turns.running == 0 and not turns.spare_taken and turns.waiting("a") == 0


def test_a_turn_handed_to_a_call_cancelled_before_it_woke_goes_on():
    turns = CallTurns(1)

    async def go() -> None:
        scope = anyio.CancelScope()

        async def waiting_b() -> None:
            with scope:
                async with turns.turn("b"):
                    await anyio.sleep(1)

        held = turns.turn("a")
        await held.__aenter__()
        async with anyio.create_task_group() as group:
            group.start_soon(waiting_b)
            await anyio.sleep(0.01)
            await held.__aexit__(None, None, None)  # hands the turn to b ...
            scope.cancel()                          # ... which is cancelled before it wakes
        assert turns.running == 0 and not turns._waiting  # b ran its turn, or passed it on
        async with turns.turn("c"):  # the turn was passed on, not lost
            assert turns.running == 1

    anyio.run(go)


class HeldCalls:
    """Calls that keep their turns until ``done`` is set; ``started``: in the order they got them."""

    def __init__(self, turns: CallTurns) -> None:
        self.turns = turns
        self.started: list[str] = []
        self.done = anyio.Event()

    async def call(self, key: str) -> None:
        async with self.turns.turn(key):
            self.started.append(key)
            await self.done.wait()

    async def start(self, group, *keys: str) -> None:
        for key in keys:
            group.start_soon(self.call, key)
        await anyio.sleep(0.02)  # each has its turn, or waits in its queue


def test_one_caller_holds_all_turns_but_one_and_another_caller_gets_that_one_at_once():
    turns = CallTurns(3)

    async def go() -> list[str]:
        held = HeldCalls(turns)
        async with anyio.create_task_group() as group:
            await held.start(group, *["writer"] * 5)
            assert turns.running_of("writer") == 2 and turns.waiting("writer") == 3
            await held.start(group, "reader")
            assert held.started[-1] == "reader"  # the turn kept free, not a wait behind the writer
            held.done.set()
        return held.started

    assert sorted(anyio.run(go)) == ["reader"] + ["writer"] * 5
    assert turns.running == 0


def test_a_caller_with_nothing_running_gets_the_spare_turn_while_others_hold_the_rest():
    """Two addresses churning long graph calls held every turn, and another caller's small
    searches waited 2.8 s each."""
    turns = CallTurns(2)

    async def go() -> list[str]:
        held = HeldCalls(turns)
        async with anyio.create_task_group() as group:
            await held.start(group, "x", "y", "x", "y")  # two callers hold both counted turns, two calls queue
            await held.start(group, "reader")
            assert held.started == ["x", "y", "reader"] and turns.spare_taken
            await held.start(group, "another")  # the spare is taken: this one waits its turn
            assert "another" not in held.started
            held.done.set()
        return held.started

    assert sorted(anyio.run(go)) == ["another", "reader", "x", "x", "y", "y"]
    assert turns.running == 0 and not turns.spare_taken

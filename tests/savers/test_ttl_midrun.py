"""A thread whose lease a run holds does not expire mid-run (per-thread TTL on
the memory, SQLite and Postgres savers, sync and async; Redis:
tests/redis/test_redis_ttl_midrun.py).

With ``ttl=1`` and a node running 2.5 s, the run's next write used to find the
thread expired and erase it first: its history dropped to the last two
checkpoints, the older naming no parent, and a read or sweep during the node
saw the thread as gone. A live lease now keeps the thread alive (checked only
once its clock ran out); the lease's release restarts the clock, and a run
taking the lease of a thread that already expired still finds it gone.
"""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest

from tests.savers.test_ttl import CASES, Clock, _open
from threadloom.checkpoint.lease.ops import read_flow
from threadloom.graph import END, START, StateGraph

TTL = 1
NODE_SECONDS = 2.5
CONFIG = {"configurable": {"thread_id": "long"}}


class State(TypedDict):
    n: Annotated[list, operator.add]


@pytest.fixture(params=[pytest.param(c, id=f"{c[0]}-{c[1]}") for c in CASES])
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


class Run:
    """One saver driven sync or async; ``during`` runs inside the slow node."""

    def __init__(self, saver: Any, mode: str) -> None:
        self.saver, self.mode = saver, mode
        self.seen: list[Any] = []

    def graph(self, wait: Callable[[float], Any], during: Any) -> Any:
        def slow(state: State) -> dict:
            if state["n"][-1] == "slow":
                wait(NODE_SECONDS / 2)
                self.seen.append(during())
                wait(NODE_SECONDS / 2)
            return {"n": ["a"]}

        async def pause(seconds: float) -> None:
            if wait is time.sleep:
                await asyncio.sleep(seconds)
            else:
                wait(seconds)

        async def aslow(state: State) -> dict:
            if state["n"][-1] == "slow":
                await pause(NODE_SECONDS / 2)
                self.seen.append(await during())
                await pause(NODE_SECONDS / 2)
            return {"n": ["a"]}

        g = StateGraph(State)
        g.add_node("a", slow if self.mode == "sync" else aslow)
        g.add_node("b", lambda s: {"n": ["b"]})
        g.add_edge(START, "a")
        g.add_edge("a", "b")
        g.add_edge("b", END)
        return g.compile(checkpointer=self.saver)

    async def invoke(self, app: Any, value: str, **kw: Any) -> list:
        if self.mode == "sync":
            return (await asyncio.to_thread(app.invoke, {"n": [value]}, CONFIG, **kw))["n"]
        return (await app.ainvoke({"n": [value]}, CONFIG, **kw))["n"]

    async def history(self, app: Any) -> list:
        if self.mode == "sync":
            return await asyncio.to_thread(lambda: list(app.get_state_history(CONFIG)))
        return [s async for s in app.aget_state_history(CONFIG)]

    async def call(self, name: str, *args: Any) -> Any:
        if self.mode == "sync":
            return await asyncio.to_thread(getattr(self.saver, name), *args)
        return await getattr(self.saver, "a" + name)(*args)

    def observer(self) -> Any:
        """Inside the node: a read of the thread and a sweep (the lease holds it)."""
        if self.mode == "sync":
            return lambda: (self.saver.get_tuple(CONFIG), self.saver.sweep_expired())

        async def look() -> Any:
            return await self.saver.aget_tuple(CONFIG), await self.saver.asweep_expired()

        return look


def linked(history: list) -> bool:
    """Each checkpoint names the next older one as its parent; the oldest none."""
    ids = [s.config["configurable"]["checkpoint_id"] for s in history]
    parents = [
        (s.parent_config or {}).get("configurable", {}).get("checkpoint_id") for s in history
    ]
    return parents == ids[1:] + [None]


async def test_run_longer_than_ttl_keeps_its_thread(case, request, tmp_path) -> None:
    """Real time: ttl=1, a 2.5 s node. Full history, parent links intact; a read
    and a sweep during the node see the thread; once the run ended and the TTL
    passed it reads as gone, and a new run on it starts afresh (the acquire
    erased the old rows: the sweep finds nothing)."""
    kind, mode = case
    async with _open(kind, str(tmp_path), request, ttl=TTL) as (saver, _):
        run = Run(saver, mode)
        app = run.graph(time.sleep, run.observer())
        assert await run.invoke(app, "x") == ["x", "a", "b"]
        assert await run.invoke(app, "slow") == ["x", "a", "b", "slow", "a", "b"]
        history = await run.history(app)
        assert [len(s.values["n"]) for s in history] == [6, 5, 4, 3, 3, 2, 1, 0]
        assert linked(history)
        ((during, swept),) = run.seen
        assert during is not None and swept.checkpoints == 0  # alive, skipped by the sweep
        await asyncio.sleep(TTL + 0.3)  # no run: the thread expires on time
        assert await run.call("get_tuple", CONFIG) is None
        assert await run.invoke(app, "x") == ["x", "a", "b"]
        fresh = await run.history(app)
        assert [len(s.values["n"]) for s in fresh] == [3, 2, 1, 0] and linked(fresh)
        assert (await run.call("sweep_expired")).checkpoints == 0


async def test_sweep_skips_a_held_thread_then_sweeps_it(case, request, tmp_path) -> None:
    """Injected clock (the run's 2.5 s pass inside the node without sleeping):
    the sweep during the run skips the thread; after the run, once the TTL has
    passed from its end, the sweep erases its whole history."""
    kind, mode = case
    clock = Clock()

    def tick(seconds: float) -> None:
        clock.now += seconds

    async with _open(kind, str(tmp_path), request, ttl=TTL, clock=clock) as (saver, _):
        run = Run(saver, mode)
        app = run.graph(tick, run.observer())
        await run.invoke(app, "x")
        await run.invoke(app, "slow")
        history = await run.history(app)
        assert [len(s.values["n"]) for s in history] == [6, 5, 4, 3, 3, 2, 1, 0]
        assert linked(history)
        ((during, swept),) = run.seen
        assert during is not None and swept.checkpoints == 0
        tick(TTL * 0.5)  # within the TTL from the run's end: kept
        assert (await run.call("sweep_expired")).checkpoints == 0
        tick(TTL)
        assert (await run.call("sweep_expired")).checkpoints == 8


async def test_a_run_without_a_lease_is_not_protected(tmp_path) -> None:
    """``lease=False`` (or ``saver.leases = False``): nothing tells the store that
    a run is in the thread, so it expires after ``ttl`` without a write or read
    as before, and the run's next write starts it afresh (docs/storage.md)."""
    clock = Clock()
    async with _open("sqlite", str(tmp_path), None, ttl=TTL, clock=clock) as (saver, _):
        run = Run(saver, "sync")
        app = run.graph(lambda s: setattr(clock, "now", clock.now + s), lambda: None)
        opts = {"lease": False, "durability": "sync"}  # (saved before the node starts)
        await run.invoke(app, "x", **opts)
        assert await run.invoke(app, "slow", **opts) == ["x", "a", "b", "slow", "a", "b"]
        history = await run.history(app)
        assert [len(s.values["n"]) for s in history] == [6, 5]
        assert linked(history)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_renewed_lease_keeps_the_thread(mode: str) -> None:
    """A lease shorter than the node (renewed by the renewer thread / task) keeps
    the thread alive as well: the lease being live is what counts."""
    from threadloom.checkpoint.memory import InMemorySaver

    saver = InMemorySaver(ttl=TTL)
    saver.lease_ttl = 0.6  # renewed every 0.2 s through the 2.5 s node
    run = Run(saver, mode)
    app = run.graph(time.sleep, run.observer())
    await run.invoke(app, "x")
    await run.invoke(app, "slow")
    history = await run.history(app)
    assert [len(s.values["n"]) for s in history] == [6, 5, 4, 3, 3, 2, 1, 0]
    assert linked(history)


@pytest.mark.parametrize("kind", ["memory", "sqlite-async"])
async def test_clock_counts_from_the_runs_end(kind: str, tmp_path) -> None:
    """A run cancelled inside a node longer than the TTL writes nothing at its
    end: the lease's release restarts the clock, so the thread lives ``ttl``
    from there (it did not expire the moment the lease was gone)."""
    clock = Clock()

    async def stuck(state: State) -> dict:
        if state["n"][-1] == "slow":
            clock.now += 2.5
            await asyncio.sleep(30)
        return {"n": ["a"]}

    async with _open(kind, str(tmp_path), None, ttl=TTL, clock=clock) as (saver, _):
        g = StateGraph(State)
        g.add_node("a", stuck)
        g.add_edge(START, "a")
        g.add_edge("a", END)
        app = g.compile(checkpointer=saver)
        await app.ainvoke({"n": ["x"]}, CONFIG, durability="sync")
        slow = app.ainvoke({"n": ["slow"]}, CONFIG, durability="sync")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow, 0.5)
        for _ in range(200):  # until the release (shielded from the cancel) ran
            if await saver._arun(read_flow("long")) is None:
                break
            await asyncio.sleep(0.01)
        history = [s async for s in app.aget_state_history(CONFIG)]
        assert [len(s.values["n"]) for s in history] == [3, 2, 2, 1, 0]
        clock.now += TTL + 0.1
        assert await saver.aget_tuple(CONFIG) is None

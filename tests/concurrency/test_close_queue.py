"""A close saves what a live durability="async" run has queued (review4).

Defects these pin: a subgraph's persister replaced its root's in the lease, so
the close saved nothing; a sync saver closed with ``await saver.aclose()`` on
the run's loop could not drain the async run's queue; a cancelled ``aclose()``
closed the connection under the run mid-drain; a process exiting with a stream
left open hung at interpreter exit (a frozen daemon thread held the queue).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid

import pytest

from tests.concurrency.backends import make_spec, open_saver
from tests.concurrency.graphs import ChainState, chain
from tests.concurrency.test_async_savers import _open
from threadloom.checkpoint.lease.fenced import FencedSaver
from threadloom.graph import START, StateGraph

KINDS = ["sqlite", "postgres", "redis"]


def _cfg() -> dict:
    return {"configurable": {"thread_id": f"queue-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}


@pytest.fixture
def slow_async_saves(monkeypatch):
    """Async saves take 0.3 s: a close surely finds the run's steps queued."""
    for name in ("aput_step", "aput_steps", "aput", "aput_writes"):
        real = getattr(FencedSaver, name)

        async def slow(self, *a, _real=real, **k):
            await asyncio.sleep(0.3)
            return await _real(self, *a, **k)

        monkeypatch.setattr(FencedSaver, name, slow)


def _with_subgraph() -> StateGraph:
    inner = chain(1).compile()
    g = StateGraph(ChainState)
    g.add_node("p", inner)
    g.add_node("s1", lambda s: {"log": ["s1"]})
    g.add_node("s2", lambda s: {"log": ["s2"]})
    g.add_edge(START, "p")
    g.add_edge("p", "s1")
    g.add_edge("s1", "s2")
    return g


@pytest.mark.parametrize("kind", KINDS)
def test_a_subgraph_does_not_hide_its_roots_queue(kind, tmp_path, request) -> None:
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    with open_saver(spec) as saver:
        it = (
            _with_subgraph()
            .compile(checkpointer=saver)
            .stream({"log": []}, cfg, stream_mode="updates", durability="async")
        )
        next(it), next(it)  # the stream stays open across the close
    with open_saver(spec) as again:
        values = _with_subgraph().compile(checkpointer=again).get_state(cfg).values
    it.close()
    assert values == {"log": ["s0", "s1"]}


@pytest.mark.parametrize("kind", KINDS)
async def test_aclose_of_a_sync_saver_saves_an_async_runs_queue(
    kind, tmp_path, request, slow_async_saves
) -> None:
    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    cm = open_saver(spec)
    saver = cm.__enter__()
    it = chain(4).compile(checkpointer=saver).astream({"log": []}, cfg, stream_mode="updates")
    await it.__anext__()
    await it.__anext__()
    await saver.aclose()  # on the run's own loop: the close waits for the drain off it
    cm.__exit__(None, None, None)
    with pytest.raises(Exception):
        await it.__anext__()
    await it.aclose()
    with open_saver(spec) as again:
        assert chain(4).compile(checkpointer=again).get_state(cfg).values == {"log": ["s0", "s1"]}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_aclose_still_saves_and_releases(
    kind, tmp_path, request, slow_async_saves
) -> None:
    cfg, tag = _cfg(), uuid.uuid4().hex[:10]
    async with _open(kind, tmp_path, request, tag) as saver:
        it = (
            chain(4)
            .compile(checkpointer=saver)
            .astream({"log": []}, cfg, stream_mode="updates", durability="async")
        )
        await it.__anext__()
        await it.__anext__()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(saver.aclose(), 0.05)  # cancelled mid-drain
    with pytest.raises(Exception):
        await it.__anext__()
    await it.aclose()
    async with _open(kind, tmp_path, request, tag) as again:
        graph = chain(4).compile(checkpointer=again)
        assert (await graph.aget_state(cfg)).values == {"log": ["s0", "s1"]}
        out = await graph.ainvoke({"log": ["B"]}, cfg, multitask_strategy="reject")
        assert out["log"][:3] == ["s0", "s1", "B"]  # the lease was released


# the 3-step SQLite chain both subprocess tests run (``g``; ``SqliteSaver`` imported)
_CHAIN_SCRIPT = textwrap.dedent(
    """
        import operator
        from typing import Annotated, TypedDict
        from threadloom.checkpoint.sqlite import SqliteSaver
        from threadloom.graph import START, StateGraph

        class S(TypedDict):
            log: Annotated[list, operator.add]

        g = StateGraph(S)
        for n in "abc":
            g.add_node(n, lambda s, n=n: {"log": [n]})
        g.add_edge(START, "a"); g.add_edge("a", "b"); g.add_edge("b", "c")
    """
)


def test_a_process_exiting_with_a_stream_open_does_not_hang(tmp_path) -> None:
    db = tmp_path / "exit.db"
    script = _CHAIN_SCRIPT + textwrap.dedent(
        f"""
        cm = SqliteSaver.from_conn_string({str(db)!r})
        saver = cm.__enter__()
        it = g.compile(checkpointer=saver).stream(
            {{"log": []}}, {{"configurable": {{"thread_id": "x"}}}}, durability="async"
        )
        next(it); next(it)
        print("exiting", flush=True)
        """
    )
    for _ in range(3):  # the hang came 2 runs in 3
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "exiting" in done.stdout, done.stderr[-2000:]


def _endless() -> StateGraph:
    g = StateGraph(ChainState)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_edge("a", "a")
    return g


@pytest.mark.parametrize("kind", KINDS)
def test_closing_under_a_run_that_keeps_queueing_returns(kind, tmp_path, request) -> None:
    """The close saves what was queued when it started: a live run keeps
    queueing, and waiting for an empty queue never ended (review5)."""
    import threading

    spec, cfg = make_spec(kind, str(tmp_path), request), _cfg()
    errors: list[BaseException] = []
    started = threading.Event()
    with open_saver(spec) as saver:
        graph = _endless().compile(checkpointer=saver)

        def run() -> None:
            try:
                for _ in graph.stream(
                    {"log": []}, {**cfg, "recursion_limit": 10**6}, durability="async"
                ):
                    started.set()
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        assert started.wait(20)
        closer = threading.Thread(target=saver.close, daemon=True)
        closer.start()
        closer.join(30)
        assert not closer.is_alive(), "close() never returned"
    worker.join(30)
    assert not worker.is_alive() and errors and "closed" in str(errors[0])


def test_a_forked_child_exits_while_the_parent_has_saves_queued(tmp_path) -> None:
    script = _CHAIN_SCRIPT + textwrap.dedent(
        f"""
        import multiprocessing as mp, time
        from threadloom.checkpoint.lease.fenced import FencedSaver

        real = FencedSaver.put_step
        def slow(self, *a, **k):
            time.sleep(0.5)
            return real(self, *a, **k)
        FencedSaver.put_step = slow

        with SqliteSaver.from_conn_string({str(tmp_path / "fork.db")!r}) as saver:
            it = g.compile(checkpointer=saver).stream(
                {{"log": []}}, {{"configurable": {{"thread_id": "x"}}}}, durability="async"
            )
            next(it); next(it)  # a save is in flight on a pool thread
            child = mp.get_context("fork").Process(target=lambda: None)
            child.start(); child.join(20)
            print("child", child.exitcode, flush=True)
            it.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=90
    )
    assert "child 0" in done.stdout, (done.stdout, done.stderr[-2000:])

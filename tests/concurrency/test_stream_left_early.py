"""A stream its caller left (``break``, ``aclose()``): what it stored, and who may run next.

A bare ``break`` drops the async generator; asyncio closes it later, in a task
of its own. A run or state update started right after the ``break`` waits for
that closing (the dropped stream can take no further step) instead of raising
``ThreadBusyError``; a stream still referenced and not closed keeps the thread.
"""

from __future__ import annotations

import asyncio
import gc
import operator
import threading
import weakref
from contextlib import asynccontextmanager
from typing import Annotated, TypedDict

import pytest

from tests.concurrency.test_async_savers import _open
from threadloom.checkpoint.lease import local
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import ThreadBusyError
from threadloom.graph import START, StateGraph


class S(TypedDict):
    x: Annotated[list, operator.add]


def _two_steps(saver):
    g = StateGraph(S)
    g.add_node("a", lambda s: {"x": ["a"]})
    g.add_node("b", lambda s: {"x": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    return g.compile(checkpointer=saver)


@asynccontextmanager
async def _saver(kind, tmp_path, request):
    if kind == "memory":
        yield InMemorySaver()
        return
    async with _open(kind, tmp_path, request) as saver:
        yield saver


CFG = {"configurable": {"thread_id": "t"}}


@pytest.mark.parametrize("durability", ["async", "exit"])
@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres", "redis"])
async def test_a_run_right_after_break_waits_for_the_dropped_stream(
    kind, durability, tmp_path, request
):
    errors: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
    async with _saver(kind, tmp_path, request) as saver:
        app = _two_steps(saver)
        async for chunk in app.astream(
            {"x": []}, CFG, stream_mode="updates", durability=durability
        ):
            assert chunk == {"a": {"x": ["a"]}}
            break
        # the dropped stream stored its step "a" before the new run read the thread
        assert await app.ainvoke({"x": ["again"]}, CFG) == {"x": ["a", "again", "a", "b"]}

        async for _ in app.astream({"x": ["c"]}, CFG, stream_mode="updates"):
            break
        await app.aupdate_state(CFG, {"x": ["u"]}, as_node="a")
        assert (await app.aget_state(CFG)).values["x"][-3:] == ["c", "a", "u"]
    gc.collect()
    assert errors == []  # no "Task exception was never retrieved" (LeaseLostError)


async def test_an_open_stream_keeps_the_thread():
    app = _two_steps(InMemorySaver())
    cfg = {"configurable": {"thread_id": "t", "run_id": "run-A"}}
    stream = app.astream({"x": []}, cfg, stream_mode="updates")
    assert await stream.__anext__() == {"a": {"x": ["a"]}}
    with pytest.raises(ThreadBusyError) as err:
        await app.ainvoke({"x": ["B"]}, CFG)
    assert err.value.holder == "run-A"
    with pytest.raises(ThreadBusyError):
        await app.aupdate_state(CFG, {"x": ["u"]}, as_node="a")
    await stream.aclose()
    assert await app.ainvoke(None, CFG) == {"x": ["a", "b"]}


async def test_a_dropped_wrapper_of_the_stream_counts_as_dropped():
    app = _two_steps(InMemorySaver())

    async def wrapper():
        async for chunk in app.astream({"x": []}, CFG, stream_mode="updates"):
            yield chunk

    async for _ in wrapper():
        break
    assert await app.ainvoke({"x": ["B"]}, CFG) == {"x": ["a", "B", "a", "b"]}


async def test_a_sync_run_on_the_dropped_streams_loop_is_refused():
    """Blocking the loop would keep the dropped stream's closing from running:
    a sync call there is answered at once, as before."""
    app = _two_steps(InMemorySaver())
    async for _ in app.astream({"x": []}, CFG, stream_mode="updates"):
        break
    with pytest.raises(ThreadBusyError):
        app.invoke({"x": ["B"]}, CFG)
    assert await app.ainvoke(None, CFG) == {"x": ["a", "b"]}  # waits for the closing


async def test_holding_is_finishing_once_dropped_or_ending():
    async def gen():
        yield 1

    h = local.Holding()
    g = gen()
    h.gen = weakref.ref(g)
    local.hold(h, "tok-test", asyncio.get_running_loop())
    try:
        assert local.finishing("tok-test") is None  # referenced, not closing: a live holder
        del g
        assert local.finishing("tok-test") is h
        assert not local.wait(h, 5)  # this loop runs here: no blocking wait
    finally:
        local.drop(h)
    assert local.finishing("tok-test") is None and h.released
    ending = local.Holding()
    local.hold(ending, "tok-ending")
    ending.ending = True
    assert local.finishing("tok-ending") is ending
    local.drop(ending)
    assert await local.await_release(ending, 5)


async def test_a_sync_wait_ends_with_the_release_on_another_thread():
    h = local.Holding()
    local.hold(h, "tok-thread")
    h.ending = True
    timer = threading.Timer(0.01, local.drop, (h,))
    timer.start()
    try:
        assert await asyncio.to_thread(local.wait, h, 10)
    finally:
        timer.join()


class _PausingSaver(InMemorySaver):
    """Pauses the first write of the thread that armed it until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.armed: int | None = None
        self.paused, self.go = threading.Event(), threading.Event()

    def _run(self, flow, write=False):
        if write and self.armed == threading.get_ident():
            self.armed = None
            self.paused.set()
            assert self.go.wait(20)
        return super()._run(flow, write)


def test_a_run_on_another_thread_waits_for_a_closing_sync_stream(monkeypatch):
    """A sync stream being closed is saving its last step: a run started on
    another thread meanwhile waits for its release instead of being refused."""
    saver = _PausingSaver()
    app = _two_steps(saver)
    real_wait = local.wait

    def wait(holding, timeout):
        saver.go.set()  # the other run waits for us: let our closing save go on
        return real_wait(holding, timeout)

    monkeypatch.setattr(local, "wait", wait)
    stream = app.stream({"x": []}, CFG, stream_mode="updates", durability="exit")
    assert next(stream) == {"a": {"x": ["a"]}}
    result: list = []

    def run_b():
        assert saver.paused.wait(20)
        result.append(app.invoke({"x": ["B"]}, CFG))

    other = threading.Thread(target=run_b)
    saver.armed = threading.get_ident()
    other.start()
    stream.close()  # its "exit" save pauses until the other run waits for it
    other.join(20)
    assert saver.go.is_set() and result == [{"x": ["a", "B", "a", "b"]}]

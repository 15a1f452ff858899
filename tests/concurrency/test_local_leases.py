"""A stream left early on an event loop that then stopped (review3 r1).

``loop.run_until_complete(main())`` where ``main`` breaks out of ``astream``:
asyncio schedules the dropped generator's ``aclose()`` as a task, which only
runs if that loop runs again. A run started meanwhile used to wait the whole
``multitask_timeout`` for a release that could not come (30 s by default, even
with "reject"), and the lease record kept the stopped loop alive. Now such a
holder is answered by the strategy at once; a closed loop's record is dropped.
"""

from __future__ import annotations

import asyncio
import gc
import operator
import threading
import weakref
from typing import Annotated, Any, TypedDict

import pytest

from threadloom.checkpoint.lease import local
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import ThreadBusyError
from threadloom.graph import START, StateGraph


class S(TypedDict):
    x: Annotated[list, operator.add]


CFG = {"configurable": {"thread_id": "t"}}


def _two_steps() -> Any:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"x": ["a"]})
    g.add_node("b", lambda s: {"x": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    return g.compile(checkpointer=InMemorySaver())


def _break_on(loop: asyncio.AbstractEventLoop, app: Any) -> local.Holding:
    """Run a stream on ``loop`` until its first chunk, drop it, stop the loop."""

    async def main() -> None:
        async for _ in app.astream({"x": []}, CFG, stream_mode="updates"):
            break

    loop.run_until_complete(main())
    [held] = [h for h in local._HELD.values() if h.loop is loop]
    return held


def test_a_run_after_a_break_on_a_stopped_loop_is_answered_at_once() -> None:
    app = _two_steps()
    loop = asyncio.new_event_loop()
    try:
        held = _break_on(loop, app)
        assert held.finishing() and held.stranded()
        assert local.finishing(held.token) is None  # nothing to wait for
        assert not local.wait(held, 3600)
        with pytest.raises(ThreadBusyError):  # "reject": refused, not after 30 s
            app.invoke({"x": ["B"]}, CFG, multitask_timeout=3600)
        with pytest.raises(ThreadBusyError):  # the async twin, on another loop
            asyncio.run(app.ainvoke({"x": ["B"]}, CFG, multitask_timeout=3600))
        assert held.token in local._HELD  # the loop may still run: its record stays
        # run again, the loop closes the dropped stream, which saves and releases
        loop.run_until_complete(asyncio.sleep(0.01))
        assert held.released and held.token not in local._HELD
        assert app.invoke({"x": ["B"]}, CFG) == {"x": ["a", "B", "a", "b"]}
    finally:
        loop.close()


def test_a_closed_loops_record_is_dropped_and_never_keeps_the_loop() -> None:
    app = _two_steps()
    loop = asyncio.new_event_loop()
    held = _break_on(loop, app)
    token = held.token
    loop_ref = weakref.ref(loop)
    loop.close()
    assert local.finishing(token) is None and token not in local._HELD
    with pytest.raises(ThreadBusyError):  # the lease row stays until its TTL
        app.invoke({"x": ["B"]}, CFG, multitask_timeout=3600)
    assert asyncio.run(local.afinishing(token)) is None
    assert held.stranded()
    roots = [held, local._HELD, local._THREADS]
    assert not _reaches(roots, loop)  # nothing of the lease records holds it
    del loop
    gc.collect()
    # asyncio's own objects (the pending aclose() task, a finalizer's report)
    # may keep a closed loop a while longer; once it is collected, so is the record's
    if loop_ref() is None:
        assert held.loop is None and held.stranded()


def _reaches(roots: list[Any], target: object, limit: int = 100_000) -> bool:
    """Whether ``target`` is strongly reachable from ``roots`` (a weak reference
    does not count: ``gc.get_referents`` does not follow it to its referent)."""
    seen: set[int] = set()
    todo = list(roots)
    while todo and len(seen) < limit:
        obj = todo.pop()
        if obj is target:
            return True
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        todo.extend(gc.get_referents(obj))
    return False


async def test_an_async_wait_ends_once_the_holders_loop_stopped() -> None:
    """A holder whose loop is not running ends an async wait at once, while a
    holder on a loop running in another thread is waited for until it releases."""
    other = asyncio.new_event_loop()
    h = local.Holding()
    local.hold(h, "tok-stopped", other)
    h.ending = True
    try:
        assert await local.afinishing("tok-stopped") is None
        assert not await local.await_release(h, 3600)
    finally:
        local.drop(h)
        other.close()


def test_a_wait_for_a_holder_on_a_running_loop_of_another_thread() -> None:
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever)
    thread.start()
    h = local.Holding()
    try:
        started = threading.Event()
        other.call_soon_threadsafe(started.set)
        assert started.wait(20)
        local.hold(h, "tok-running", other)
        h.ending = True
        assert local.finishing("tok-running") is h  # a live loop: its release will come
        other.call_soon_threadsafe(local.drop, h)
        assert local.wait(h, 3600)
    finally:
        local.drop(h)
        other.call_soon_threadsafe(other.stop)
        thread.join(20)
        other.close()

"""After ``async for ... break`` (or ``for ... break``): a read right away shows
what was streamed, and closing the saver lets the dropped run save and release
first (found by a side-by-side probe, session 10).

Before: ``aget_state`` right after the break showed the state before the streamed
step (the dropped stream saved ~0.5 s later), and leaving ``async with
Saver.from_conn_string(...)`` closed the connection under the dropped run, which
could not release its lease: reopening the file and resuming the thread raised
``ThreadBusyError`` for the lease's whole TTL (30 s)."""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import Annotated, TypedDict

import pytest

from tests.concurrency.test_async_savers import _open
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.graph import START, StateGraph


class S(TypedDict):
    x: Annotated[list, operator.add]


def _fan(saver):
    """fast, then slow and par side by side, then last."""

    async def slow(s: S) -> dict:
        await asyncio.sleep(0.3)
        return {"x": ["slow"]}

    g = StateGraph(S)
    g.add_node("fast", lambda s: {"x": ["fast"]})
    g.add_node("slow", slow)
    g.add_node("par", lambda s: {"x": ["par"]})
    g.add_node("last", lambda s: {"x": ["last"]})
    g.add_edge(START, "fast")
    g.add_edge("fast", "slow")
    g.add_edge("fast", "par")
    g.add_edge("slow", "last")
    g.add_edge("par", "last")
    return g.compile(checkpointer=saver)


async def _break_after_par(app, cfg) -> None:
    async for update in app.astream({"x": []}, cfg, stream_mode="updates"):
        if "par" in update:
            break


@pytest.mark.parametrize("thread_id", ["A", 1])
async def test_a_read_right_after_break_shows_what_was_streamed(thread_id) -> None:
    app = _fan(InMemorySaver())
    cfg = {"configurable": {"thread_id": thread_id}}
    await _break_after_par(app, cfg)
    state = await app.aget_state(cfg)  # par's write is stored (as LangGraph shows it)
    assert (state.values, state.next) == ({"x": ["fast", "par"]}, ("slow",))


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
async def test_closing_the_saver_lets_a_dropped_run_release(kind, tmp_path, request) -> None:
    cfg, tag = {"configurable": {"thread_id": "B"}}, uuid.uuid4().hex[:10]
    async with _open(kind, tmp_path, request, tag) as saver:
        await _break_after_par(_fan(saver), cfg)
    async with _open(kind, tmp_path, request, tag) as saver:
        app = _fan(saver)
        state = await app.aget_state(cfg)
        assert (state.values, state.next) == ({"x": ["fast", "par"]}, ("slow",))
        out = await app.ainvoke(None, cfg)  # not ThreadBusyError for the lease's TTL
        assert out == {"x": ["fast", "par", "slow", "last"]}


def test_holders_of_one_thread_id_in_two_stores_are_both_kept() -> None:
    from threadloom.checkpoint.lease import local

    first, second = local.Holding(), local.Holding()
    local.hold(first, "tok-1", thread="same")
    local.hold(second, "tok-2", thread="same")
    try:
        local.drop(second)  # the other store's run ended: the first is still known
        assert local._THREADS["same"] == [first]
    finally:
        local.drop(first)
    assert "same" not in local._THREADS

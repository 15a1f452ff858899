"""Conditional edges, the START task and ``"*"`` interrupts, against LangGraph.

Review findings of session 6 (each failed before its fix):

- an async routing function under ``ainvoke`` ran via ``asyncio.run`` on a new
  thread: the caller's loop was blocked, loop-bound clients broke, a cancel waited
  for the router to finish;
- with durability "sync" the input checkpoint was held while a conditional entry
  point (``add_conditional_edges(START, router)``) ran user code in the START task;
- ``interrupt_before/after="*"`` also paused at the hidden START task.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest

IMPLS = ("langgraph", "threadloom")


class S(TypedDict):
    log: Annotated[list, operator.add]


def mods(impl: str) -> tuple[Any, Any]:
    if impl == "langgraph":
        import langgraph.graph as g
        from langgraph.checkpoint.memory import InMemorySaver
    else:
        import threadloom.graph as g
        from threadloom.checkpoint.memory import InMemorySaver
    return g, InMemorySaver()


def cfg(tid: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": tid}}


def history(saver: Any, tid: str) -> list[tuple[str, int, list[str]]]:
    return [
        (t.metadata["source"], t.metadata["step"], sorted(w[1] for w in t.pending_writes or []))
        for t in saver.list(cfg(tid))
    ]


async def run(app: Any, mode: str, inp: Any, config: dict[str, Any], **kw: Any) -> Any:
    if mode == "sync":
        return app.invoke(inp, config, **kw)
    return await app.ainvoke(inp, config, **kw)


# -- 1. async routing functions run on the caller's loop ------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("edge_from", ["__start__", "s"])
async def test_async_router_runs_on_the_callers_loop(impl, edge_from):
    g, _ = mods(impl)
    main_loop = asyncio.get_running_loop()
    seen: dict[str, bool] = {}

    async def router(s):
        seen["same_loop"] = asyncio.get_running_loop() is main_loop
        return "a"

    b = g.StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    if edge_from == "s":
        b.add_node("s", lambda s: {"log": ["s"]})
        b.add_edge(g.START, "s")
    b.add_conditional_edges(edge_from, router, ["a"])
    b.add_edge("a", g.END)
    out = await b.compile().ainvoke({"log": []})
    assert out == {"log": ["s", "a"] if edge_from == "s" else ["a"]}
    assert seen == {"same_loop": True}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("edge_from", ["__start__", "s"])
async def test_a_cancel_reaches_an_async_router(impl, edge_from):
    g, saver = mods(impl)
    main_loop = asyncio.get_running_loop()
    started = asyncio.Event()
    seen: list[str] = []

    async def router(s):
        main_loop.call_soon_threadsafe(started.set)
        try:
            await asyncio.sleep(2)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("finished")
        return "a"

    b = g.StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    if edge_from == "s":
        b.add_node("s", lambda s: {"log": ["s"]})
        b.add_edge(g.START, "s")
    b.add_conditional_edges(edge_from, router, ["a"])
    b.add_edge("a", g.END)
    app = b.compile(checkpointer=saver)
    run_ = asyncio.ensure_future(app.ainvoke({"log": []}, cfg("c"), durability="sync"))
    await started.wait()
    run_.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run_
    assert seen == ["cancelled"]


async def _held_case(impl: str, case: str) -> list[tuple[str, int, list[str]]]:
    g, saver = mods(impl)
    started = asyncio.Event()
    main_loop = asyncio.get_running_loop()

    async def router(s):
        if case == "router_raises":
            raise ValueError("boom")
        if case == "cancel_in_router":
            main_loop.call_soon_threadsafe(started.set)
            await asyncio.sleep(2)
        return "a"

    b = g.StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_conditional_edges(g.START, router, ["a"])
    b.add_edge("a", g.END)
    app = b.compile(checkpointer=saver)
    if case == "break_after_first":
        async for _ in app.astream({"log": []}, cfg(case), durability="sync", stream_mode="values"):
            break
    elif case == "router_raises":
        with pytest.raises(ValueError, match="boom"):
            await app.ainvoke({"log": []}, cfg(case), durability="sync")
    else:
        run_ = asyncio.ensure_future(app.ainvoke({"log": []}, cfg(case), durability="sync"))
        await started.wait()
        run_.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run_
    return history(saver, case)


@pytest.mark.parametrize("case", ["break_after_first", "router_raises", "cancel_in_router"])
async def test_history_when_a_run_ends_in_or_after_the_start_router(case):
    lg = await _held_case("langgraph", case)
    assert await _held_case("threadloom", case) == lg
    assert lg[-1][:2] == ("input", -1)  # the input is stored whatever happens in the router


# -- 2. the input checkpoint is stored before a START router runs ---------------------


@pytest.mark.parametrize(
    ("impl", "mode", "is_async"),
    [
        (impl, mode, is_async)
        for impl in IMPLS
        for mode in ("sync", "async")
        for is_async in (False, True)
        # LangGraph's invoke cannot run an async routing function; threadloom's can
        if not (impl == "langgraph" and mode == "sync" and is_async)
    ],
)
async def test_a_start_router_sees_the_input_stored(impl, mode, is_async):
    g, saver = mods(impl)
    seen: list[Any] = []

    def look(s):
        seen.append((history(saver, "r"), app.get_state(cfg("r")).values))
        return "a"

    async def alook(s):
        return look(s)

    b = g.StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_conditional_edges(g.START, alook if is_async else look, ["a"])
    b.add_edge("a", g.END)
    app = b.compile(checkpointer=saver)
    out = await run(app, mode, {"log": ["in"]}, cfg("r"), durability="sync")
    assert out == {"log": ["in", "a"]}
    assert seen == [([("input", -1, [])], {"log": []})]


# -- 3. "*" interrupts skip the hidden START task -------------------------------------


async def _star(impl: str, kw: dict[str, Any], mode: str) -> tuple[Any, ...]:
    g, saver = mods(impl)
    b = g.StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("b", lambda s: {"log": ["b"]})
    b.add_edge(g.START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", g.END)
    app = b.compile(checkpointer=saver, **kw)
    first = await run(app, mode, {"log": []}, cfg("x"), durability="sync")
    state = app.get_state(cfg("x"))
    snap = (history(saver, "x"), state.next, first)
    second = await run(app, mode, None, cfg("x"), durability="sync")
    return snap, (history(saver, "x"), app.get_state(cfg("x")).next, second)


@pytest.mark.parametrize(
    "kw",
    [{"interrupt_before": "*"}, {"interrupt_after": "*"}, {"interrupt_before": ["a"]}],
    ids=["before_star", "after_star", "before_a"],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_star_interrupts_skip_the_start_task(kw, mode):
    lg = await _star("langgraph", kw, mode)
    tl = await _star("threadloom", kw, mode)
    assert tl == lg
    first_next = tl[0][1]
    assert first_next == (("b",) if "interrupt_after" in kw else ("a",))


# -- 4. aupdate_state(as_node=...) awaits the node's async router on the caller's loop ---


def _update_graph(g: Any, saver: Any, router: Any) -> Any:
    b = g.StateGraph(S)
    b.add_node("s", lambda s: {"log": ["s"]})
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("b", lambda s: {"log": ["b"]})
    b.add_edge(g.START, "s")
    b.add_conditional_edges("s", router, ["a", "b"])
    return b.compile(checkpointer=saver, interrupt_before=["a", "b"])


@pytest.mark.parametrize("impl", IMPLS)
async def test_aupdate_state_awaits_an_async_router_on_the_callers_loop(impl):
    g, saver = mods(impl)
    main_loop = asyncio.get_running_loop()
    seen: list[bool] = []

    async def router(s):
        seen.append(asyncio.get_running_loop() is main_loop)
        return "b" if "x" in s["log"] else "a"

    app = _update_graph(g, saver, router)
    await app.ainvoke({"log": []}, cfg("u"))
    assert (await app.aget_state(cfg("u"))).next == ("a",)
    await app.aupdate_state(cfg("u"), {"log": ["x"]}, as_node="s")
    assert (await app.aget_state(cfg("u"))).next == ("b",)
    assert seen == [True, True]
    assert (await app.ainvoke(None, cfg("u")))["log"] == ["s", "x", "b"]


@pytest.mark.parametrize("impl", IMPLS)
async def test_a_cancel_reaches_an_async_router_in_aupdate_state(impl):
    g, saver = mods(impl)
    main_loop = asyncio.get_running_loop()
    started = asyncio.Event()
    seen: list[str] = []
    calls = 0

    async def router(s):
        nonlocal calls
        calls += 1
        if calls == 1:  # the run's own routing: answer at once
            return "a"
        started.set()
        try:
            await asyncio.sleep(2)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("finished")
        return "b"

    app = _update_graph(g, saver, router)
    await app.ainvoke({"log": []}, cfg("c"))
    before = [t.checkpoint["id"] for t in saver.list(cfg("c"))]
    update = asyncio.ensure_future(app.aupdate_state(cfg("c"), {"log": ["x"]}, as_node="s"))
    await asyncio.wait_for(started.wait(), 5)
    assert asyncio.get_running_loop() is main_loop
    update.cancel()
    with pytest.raises(asyncio.CancelledError):
        await update
    assert seen == ["cancelled"]
    assert [t.checkpoint["id"] for t in saver.list(cfg("c"))] == before  # nothing written

"""Parity, async API: aget_state, aget_state_history, aupdate_state, abulk_update_state,
ainvoke replay/resume, subgraph state; memory and AsyncSqliteSaver, every durability."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    value: Annotated[list[str], operator.add]


def appender(tag: str, log: list[str] | None = None):
    async def node(state: State) -> dict:
        if log is not None:
            log.append(tag)
        return {"value": [tag]}

    return node


def asker(lib, tag: str, log: list[str] | None = None):
    async def node(state: State) -> dict:
        if log is not None:
            log.append(tag)
        return {"value": [f"{tag}:{lib.interrupt(tag + '?')}"]}

    return node


def chain(lib, saver, *names: str, ask: tuple[str, ...] = (), log=None, **compile_kw):
    builder = lib.StateGraph(State)
    for name in names:
        builder.add_node(name, asker(lib, name, log) if name in ask else appender(name, log))
    builder.add_edge(lib.START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver, **compile_kw)


async def ahistory(graph, config=CFG, **kwargs) -> list:
    return [s async for s in graph.aget_state_history(config, **kwargs)]


async def sc_history_replay_fork(lib, saver, durability):
    log: list[str] = []
    graph = chain(lib, saver, "a", "ask", "b", ask=("ask",), log=log)
    obs = [("first", await graph.ainvoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("interrupted", await graph.aget_state(CFG)))
    obs.append(("resume", await graph.ainvoke(lib.Command(resume="y"), CFG, **h.kw(durability))))
    full = await ahistory(graph)
    obs.append(("history", full))
    obs.append(("limit", await ahistory(graph, limit=2)))
    obs.append(("filter", await ahistory(graph, filter={"source": "loop"})))
    before_ask = [s for s in full if s.next == ("ask",)][-1]
    log.clear()
    obs.append(("replay", await graph.ainvoke(None, before_ask.config, **h.kw(durability))))
    obs.append(("ran", list(log)))
    fork = await graph.aupdate_state(before_ask.config, {"value": ["f"]}, as_node="a")
    obs.append(("fork state", await graph.aget_state(fork)))
    obs.append(("fork run", await graph.ainvoke(None, fork, **h.kw(durability))))
    obs.append(("fork resume", await graph.ainvoke(lib.Command(resume="z"), fork)))
    obs.append(("history 2", await ahistory(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
async def test_async_history_replay_fork(saver: str, durability: str) -> None:
    await h.arun_parity(sc_history_replay_fork, saver, durability)


async def sc_async_updates(lib, saver, durability):
    graph = chain(lib, saver, "a", "b", "c")
    SU = lib.StateUpdate
    cfg = await graph.abulk_update_state(
        CFG, [[SU({"value": ["in"]}, "__input__")], [SU({"value": ["a1"]}, "a")]]
    )
    obs = [("bulk", cfg), ("state", await graph.aget_state(CFG))]
    obs.append(("run", await graph.ainvoke(None, CFG, **h.kw(durability))))
    obs.append(("update", await graph.aupdate_state(CFG, {"value": ["u"]})))
    obs.append(("unknown", await h.araises(graph.aupdate_state(CFG, {}, as_node="zz"), lib)))
    before_b = next(s for s in await ahistory(graph) if s.next == ("b",))
    obs.append(("copy", await graph.aupdate_state(before_b.config, None, as_node="__copy__")))
    obs.append(("end", await graph.aupdate_state(CFG, None, as_node=lib.END)))
    obs.append(("history", await ahistory(graph)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
async def test_async_updates(saver: str, durability: str) -> None:
    await h.arun_parity(sc_async_updates, saver, durability)


async def sc_async_subgraph(lib, saver, durability):
    child = (
        lib.StateGraph(State)
        .add_node("c1", appender("c1"))
        .add_node("c_ask", asker(lib, "c_ask"))
        .add_edge(lib.START, "c1")
        .add_edge("c1", "c_ask")
        .compile()
    )
    graph = (
        lib.StateGraph(State)
        .add_node("p1", appender("p1"))
        .add_node("child", child)
        .add_edge(lib.START, "p1")
        .add_edge("p1", "child")
        .compile(checkpointer=saver)
    )
    obs = [("first", await graph.ainvoke({"value": []}, CFG, **h.kw(durability)))]
    obs.append(("nested", await graph.aget_state(CFG, subgraphs=True)))
    sub_cfg = (await graph.aget_state(CFG)).tasks[0].state
    obs.append(("child", await graph.aget_state(sub_cfg)))
    obs.append(("child history", await ahistory(graph, sub_cfg)))
    obs.append(("update child", await graph.aupdate_state(sub_cfg, {"value": ["x"]}, as_node="c1")))
    obs.append(("resume", await graph.ainvoke(lib.Command(resume="ok"), CFG, **h.kw(durability))))
    obs.append(("done", await graph.aget_state(CFG, subgraphs=True)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
async def test_async_subgraph_state(saver: str, durability: str) -> None:
    await h.arun_parity(sc_async_subgraph, saver, durability)


async def sc_async_router_update(lib, saver, durability):
    """aupdate_state runs an async conditional edge to pick the next node."""

    async def route(state: State) -> str:
        return "yes" if "go" in state["value"] else "no"

    graph = (
        lib.StateGraph(State)
        .add_node("decide", appender("decide"))
        .add_node("yes", appender("yes"))
        .add_node("no", appender("no"))
        .add_edge(lib.START, "decide")
        .add_conditional_edges("decide", route, ["yes", "no"])
        .compile(checkpointer=saver, interrupt_before=["yes", "no"])
    )
    await graph.ainvoke({"value": []}, CFG, **h.kw(durability))
    obs = [("before", await graph.aget_state(CFG))]
    obs.append(("update", await graph.aupdate_state(CFG, {"value": ["go"]}, as_node="decide")))
    obs.append(("routed", await graph.aget_state(CFG)))
    obs.append(("finish", await graph.ainvoke(None, CFG, **h.kw(durability))))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
async def test_async_router_in_update(durability: str) -> None:
    await h.arun_parity(sc_async_router_update, "memory", durability)

"""Parity: replay the root from a *subgraph's* checkpoint, one and two levels down.

``graph.invoke(None, child_config)`` (a config from the child's history) replays the
root from the checkpoint the child ran under (a ``fork`` checkpoint, as LangGraph),
and the child from the checkpoint named. Values, interrupts, resumes, nested state
and histories are compared with LangGraph. One deliberate difference is asserted
separately: LangGraph re-runs the child from its start whatever child checkpoint was
named; threadloom re-runs only what follows it (``ran``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity import helpers as h
from tests.parity.test_subgraph_persistence import (
    CFG,
    child_graph,
    history,
    parent_graph,
    three_level_graph,
)

RAN: dict[str, list[str]] = {}  # library name -> nodes run by the replay (not compared)

# child history, newest first: 0 = before c_ask, 1 = before c1, 2 = the child's input
CHILD_PICKS = {0: ["c_ask"], 1: ["c1", "c_ask"], 2: ["c1", "c_ask"]}


def _replay_obs(lib, graph, target, log, durability) -> list[tuple[str, Any]]:
    log.clear()
    obs = [("replay", h.raises(lambda: graph.invoke(None, target, **h.kw(durability)), lib))]
    RAN[lib.name] = list(log)
    nested = graph.get_state(CFG, subgraphs=True)
    obs.append(("nested", nested))
    obs.append(("root history", history(graph)))
    child = nested.tasks[0].state
    obs.append(("new child history", history(graph, child.config)))
    obs.append(("resume", graph.invoke(lib.Command(resume="again"), CFG, **h.kw(durability))))
    obs.append(("done", graph.get_state(CFG, subgraphs=True)))
    obs.append(("history after", history(graph)))
    return obs


def replay_child(pick: int):
    def sc(lib, saver, durability):
        log: list[str] = []
        graph = parent_graph(lib, saver, child_graph(lib, log=log), log)
        graph.invoke({"value": []}, CFG)
        child_hist = history(graph, graph.get_state(CFG).tasks[0].state)
        return [("child history", child_hist)] + _replay_obs(
            lib, graph, child_hist[pick].config, log, durability
        )

    return sc


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
@pytest.mark.parametrize("pick", sorted(CHILD_PICKS))
def test_replay_from_subgraph_checkpoint(pick: int, saver: str, durability: str) -> None:
    h.run_parity(replay_child(pick), saver, durability)
    assert RAN["langgraph"] == ["c1", "c_ask"]  # LangGraph restarts the child
    assert RAN["threadloom"] == CHILD_PICKS[pick]  # threadloom: only what follows the pick


# inner history newest first: 0 = before c_ask, 2 = inner's input;
# middle history: 0 = before inner (m1 done), 2 = middle's input
DEEP_PICKS = {
    ("inner", 0): ["c_ask"],
    ("inner", 2): ["c1", "c_ask"],
    ("middle", 0): ["c1", "c_ask"],
    ("middle", 2): ["m1", "c1", "c_ask"],
}


def replay_deep(level: str, pick: int):
    def sc(lib, saver, durability):
        log: list[str] = []
        graph = three_level_graph(lib, saver, log)
        graph.invoke({"value": []}, CFG)
        middle_cfg = graph.get_state(CFG).tasks[0].state
        cfg = middle_cfg if level == "middle" else graph.get_state(middle_cfg).tasks[0].state
        hist = history(graph, cfg)
        return [("picked history", hist)] + _replay_obs(
            lib, graph, hist[pick].config, log, durability
        )

    return sc


@pytest.mark.parametrize("durability", h.DURABILITIES)
@pytest.mark.parametrize("saver", h.SAVERS)
@pytest.mark.parametrize("level,pick", sorted(DEEP_PICKS), ids=lambda v: str(v))
def test_replay_three_levels_from_subgraph_checkpoint(
    level: str, pick: int, saver: str, durability: str
) -> None:
    h.run_parity(replay_deep(level, pick), saver, durability)
    assert RAN["langgraph"] == ["m1", "c1", "c_ask"]
    assert RAN["threadloom"] == DEEP_PICKS[(level, pick)]


def fork_deep(lib, saver, durability):
    """update_state on an old inner checkpoint, then replay the root from that fork."""
    log: list[str] = []
    graph = three_level_graph(lib, saver, log)
    graph.invoke({"value": []}, CFG)
    inner_cfg = graph.get_state(graph.get_state(CFG).tasks[0].state).tasks[0].state
    before_c1 = next(s for s in history(graph, inner_cfg) if s.next == ("c1",))
    fork = graph.update_state(before_c1.config, {"value": ["inner-fork"]}, as_node="c1")
    log.clear()
    replay = graph.invoke(None, fork)
    ran = list(log)
    inner = graph.get_state(CFG, subgraphs=True).tasks[0].state.tasks[0].state
    done = graph.invoke(lib.Command(resume="again"), CFG)
    return replay, ran, inner.values, done


@pytest.mark.parametrize("saver", h.SAVERS)
def test_fork_three_levels_from_subgraph_checkpoint(saver: str) -> None:
    """Deliberate difference: the replay starts the inner graph from the fork (LangGraph
    restarts it from scratch, so the forked value is lost)."""
    lib = h._lib("threadloom")
    with h.open_saver(lib, saver) as checkpointer:
        replay, ran, inner, done = fork_deep(lib, checkpointer, None)
    assert [i.value for i in replay["__interrupt__"]] == ["c_ask?"]
    assert ran == ["c_ask"]  # the fork stands for c1
    assert inner == {"value": ["p1", "m1", "inner-fork"]}
    assert done["value"][-3:] == ["c_ask:again", "c2", "p2"] and "inner-fork" in done["value"]
    assert "c1" not in done["value"]
    oracle_replay, oracle_ran, oracle_inner, _ = h.oracle_only(fork_deep, saver)
    assert oracle_ran == ["m1", "c1", "c_ask"]
    assert oracle_inner == {"value": ["p1", "m1", "c1"]}


async def areplay_child(lib, saver, durability):
    log: list[str] = []
    graph = parent_graph(lib, saver, child_graph(lib, log=log), log)
    await graph.ainvoke({"value": []}, CFG)
    sub = (await graph.aget_state(CFG)).tasks[0].state
    child_hist = [s async for s in graph.aget_state_history(sub)]
    log.clear()
    obs = [("replay", await graph.ainvoke(None, child_hist[0].config))]
    RAN[lib.name] = list(log)
    obs.append(("nested", await graph.aget_state(CFG, subgraphs=True)))
    obs.append(("resume", await graph.ainvoke(lib.Command(resume="again"), CFG)))
    obs.append(("history", [s async for s in graph.aget_state_history(CFG)]))
    return obs


@pytest.mark.parametrize("saver", h.SAVERS)
async def test_replay_from_subgraph_checkpoint_async(saver: str) -> None:
    await h.arun_parity(areplay_child, saver)
    assert RAN["langgraph"] == ["c1", "c_ask"]
    assert RAN["threadloom"] == ["c_ask"]


def replay_persistent_child(lib, saver, durability):
    """checkpointer=True child (one history per thread): replay from a checkpoint of its
    first run; the root goes back to that run and the child forks off that checkpoint."""
    log: list[str] = []
    graph = parent_graph(lib, saver, child_graph(lib, log=log, checkpointer=True), log)
    graph.invoke({"value": []}, CFG)
    graph.invoke(lib.Command(resume="a"), CFG)
    graph.invoke({"value": ["run2"]}, CFG)
    child_hist = history(graph, graph.get_state(CFG).tasks[0].state)
    before_c2 = next(s for s in child_hist if s.next == ("c2",))
    log.clear()
    obs = [("child history", child_hist)]
    obs.append(("replay", graph.invoke(None, before_c2.config, **h.kw(durability))))
    obs.append(("ran", list(log)))
    obs.append(("root history", history(graph)))
    obs.append(("child history after", history(graph, before_c2.config)))
    return obs


@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_replay_from_persistent_subgraph_checkpoint(durability: str) -> None:
    h.run_parity(replay_persistent_child, "sqlite", durability)

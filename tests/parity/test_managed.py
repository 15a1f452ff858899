"""Parity: managed state keys (``RemainingSteps``, ``IsLastStep``) as LangGraph computes them.

They are derived from the step and the run's ``recursion_limit`` (a subgraph counts
from its own start), read by nodes and routers, never written and never stored:
not in checkpoints, ``get_state``, the output or the values stream.
"""

from __future__ import annotations

import importlib
import operator
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t"}}


def _m(lib: Any) -> Any:
    return importlib.import_module(f"{lib.name}.managed")


def _state(lib: Any) -> Any:
    m = _m(lib)
    return TypedDict(
        "S",
        {
            "log": Annotated[list, operator.add],
            "remaining_steps": m.RemainingSteps,
            "is_last_step": m.IsLastStep,
        },
    )


def _rec(tag: str) -> Any:
    def node(s: dict) -> dict:
        return {"log": [[tag, s["remaining_steps"], s["is_last_step"]]]}

    return node


def _loop(lib: Any, saver: Any, route: Any) -> Any:
    g = lib.StateGraph(_state(lib))
    g.add_node("agent", _rec("agent"))
    g.add_edge(lib.START, "agent")
    g.add_conditional_edges("agent", route)
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("saver", h.SAVERS)
def test_loop_stops_on_remaining_steps(saver: str) -> None:
    def sc(lib, saver, durability):
        app = _loop(lib, saver, lambda s: lib.END if s["remaining_steps"] < 2 else "agent")
        obs = []
        for i, limit in enumerate((3, 6)):
            cfg = {"configurable": {"thread_id": f"t{i}"}, "recursion_limit": limit}
            obs.append((f"run{limit}", app.invoke({"log": []}, cfg)))
            snap = app.get_state(cfg)
            obs.append((f"state{limit}", (snap.values, snap.next)))
            tup = saver.get_tuple(cfg)
            obs.append((f"stored{limit}", sorted(tup.checkpoint["channel_values"])))
        return obs

    h.run_parity(sc, saver)
    lib = h._lib("threadloom")
    with h.open_saver(lib, "memory") as s:
        app = _loop(lib, s, lambda st: lib.END if st["remaining_steps"] < 2 else "agent")
        out = app.invoke({"log": []}, {**CFG, "recursion_limit": 4})
    assert [e[1] for e in out["log"]] == [3, 2, 1]
    assert out["log"][-1][2] is True  # the last step the limit allows


def test_is_last_step_and_recursion_error() -> None:
    def sc(lib, saver, durability):
        stop = _loop(lib, None, lambda s: lib.END if s["is_last_step"] else "agent")
        never = _loop(lib, None, lambda s: "agent")
        return [
            ("stops", stop.invoke({"log": []}, {"recursion_limit": 3})),
            ("limit", h.raises(lambda: never.invoke({"log": []}, {"recursion_limit": 3}), lib)),
            (
                "values",
                list(stop.stream({"log": []}, {"recursion_limit": 2}, stream_mode="values")),
            ),
        ]

    h.run_parity(sc)


def _with_subgraph(lib: Any, saver: Any) -> Any:
    sub = lib.StateGraph(_state(lib))
    sub.add_node("s1", _rec("s1"))
    sub.add_node("s2", _rec("s2"))
    sub.add_edge(lib.START, "s1")
    sub.add_edge("s1", "s2")
    child = sub.compile()

    def call(s: dict) -> dict:  # a subgraph invoked inside a node
        return {"log": child.invoke({"log": []})["log"]}

    g = lib.StateGraph(_state(lib))
    g.add_node("a", _rec("a"))
    g.add_node("sub", child)
    g.add_node("call", call)
    g.add_edge(lib.START, "a")
    g.add_edge("a", "sub")
    g.add_edge("sub", "call")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("saver", h.SAVERS)
def test_subgraphs_count_from_their_own_start(saver: str) -> None:
    def sc(lib, saver, durability):
        app = _with_subgraph(lib, saver)
        cfg = {**CFG, "recursion_limit": 20}
        return [
            ("run", app.invoke({"log": []}, cfg)),
            ("state", app.get_state(cfg, subgraphs=True).values),
        ]

    h.run_parity(sc, saver)


async def test_async_and_subgraph() -> None:
    async def sc(lib, saver, durability):
        app = _with_subgraph(lib, saver)
        return [("run", await app.ainvoke({"log": []}, {**CFG, "recursion_limit": 9}))]

    await h.arun_parity(sc)


@pytest.mark.parametrize("saver", h.SAVERS)
def test_resume_counts_from_the_resumed_step(saver: str) -> None:
    """After an interrupt, the resumed run gets a fresh budget from its own limit."""

    def sc(lib, saver, durability):
        g = lib.StateGraph(_state(lib))
        for n in ("a", "b", "c"):
            g.add_node(n, _rec(n))
        g.add_edge(lib.START, "a")
        g.add_edge("a", "b")
        g.add_edge("b", "c")
        app = g.compile(checkpointer=saver, interrupt_before=["b"])
        cfg = {**CFG, "recursion_limit": 10}
        obs = [("first", app.invoke({"log": []}, cfg))]
        obs.append(("paused", app.get_state(cfg).values))
        obs.append(("resume", app.invoke(None, {**cfg, "recursion_limit": 5})))
        app.update_state(cfg, {"remaining_steps": 1, "log": [["upd"]]})  # managed: dropped
        obs.append(("updated", app.get_state(cfg).values))
        obs.append(("history", [s.values for s in app.get_state_history(cfg)]))
        obs.append(("stored", sorted(saver.get_tuple(cfg).checkpoint["channel_values"])))
        return obs

    h.run_parity(sc, saver)


def test_writes_and_input_are_dropped() -> None:
    def sc(lib, saver, durability):
        def w(s: dict) -> dict:
            return {"remaining_steps": 99, "is_last_step": True, "log": [s["remaining_steps"]]}

        g = lib.StateGraph(_state(lib))
        g.add_node("w", w)
        g.add_node("r", _rec("r"))
        g.add_edge(lib.START, "w")
        g.add_edge("w", "r")
        app = g.compile()
        return [
            ("write", app.invoke({"log": []}, {"recursion_limit": 7})),
            ("input", app.invoke({"log": [], "remaining_steps": 3}, {"recursion_limit": 7})),
        ]

    h.run_parity(sc)


def test_routers_on_start_and_send() -> None:
    def sc(lib, saver, durability):
        g = lib.StateGraph(_state(lib))
        g.add_node("a", _rec("a"))
        g.add_node("keys", lambda s: {"log": [sorted(s)]})
        g.add_conditional_edges(
            lib.START,
            lambda s: [lib.Send("keys", {"log": []}), "a" if s["remaining_steps"] > 5 else "keys"],
        )
        return [("run", g.compile().invoke({"log": []}, {"recursion_limit": 9}))]

    h.run_parity(sc)


def test_schema_kinds() -> None:
    """pydantic and dataclass states, and a node input_schema of managed keys only."""

    def sc(lib, saver, durability):
        m = _m(lib)
        P = type(
            "P",
            (BaseModel,),
            {
                "__annotations__": {"log": Annotated[list, operator.add], "rs": m.RemainingSteps},
                "log": [],
                "rs": 0,
            },
        )
        D = dataclass(
            type(
                "D",
                (),
                {
                    "__annotations__": {"log": Annotated[list, operator.add], "last": m.IsLastStep},
                    "log": field(default_factory=list),
                    "last": False,
                },
            )
        )
        NI = TypedDict("NI", {"remaining_steps": m.RemainingSteps})  # noqa: UP013 (local m)
        obs = []
        for schema, node in (
            (P, lambda s: {"log": [type(s).__name__, s.rs]}),
            (D, lambda s: {"log": [type(s).__name__, s.last]}),
        ):
            g = lib.StateGraph(schema)
            g.add_node("a", node)
            g.add_edge(lib.START, "a")
            obs.append((schema.__name__, g.compile().invoke({"log": []}, {"recursion_limit": 2})))
        g = lib.StateGraph(_state(lib))
        g.add_node("a", lambda s: {"log": [sorted(s.items())]}, input_schema=NI)
        g.add_edge(lib.START, "a")
        obs.append(("node_input", g.compile().invoke({"log": []}, {"recursion_limit": 9})))
        bad_in = h.raises(lambda: lib.StateGraph(_state(lib), input_schema=NI), lib)
        bad_out = h.raises(lambda: lib.StateGraph(_state(lib), output_schema=NI), lib)
        obs.append(("io_schemas", (bad_in, bad_out)))
        return obs

    h.run_parity(sc)


def test_managed_keys_have_no_channel() -> None:
    from threadloom.graph import START, StateGraph
    from threadloom.managed import IsLastStepManager, RemainingStepsManager

    lib = h._lib("threadloom")
    g = StateGraph(_state(lib))
    g.add_node("a", _rec("a"))
    g.add_edge(START, "a")
    app = g.compile()
    assert g.managed == {
        "remaining_steps": RemainingStepsManager,
        "is_last_step": IsLastStepManager,
    }
    assert "remaining_steps" not in app.channels and "is_last_step" not in app.channels
    assert app.output_channels == ["log"]


def test_router_in_update_state_as_node() -> None:
    """update_state(as_node=...) runs the node's router, which reads the managed keys."""

    def sc(lib, saver, durability):
        seen = []

        def route(s: dict) -> Any:
            seen.append([s["remaining_steps"], s["is_last_step"]])
            return lib.END

        app = _loop(lib, saver, route)
        app.invoke({"log": []}, CFG)
        app.update_state(CFG, {"log": [["upd"]]}, as_node="agent")
        return [("seen", seen), ("next", app.get_state(CFG).next)]

    h.run_parity(sc)


def test_langgraph_managed_annotations_work_in_threadloom() -> None:
    """A state class written with langgraph.managed (e.g. from a LangGraph package) runs."""
    from langgraph.managed import IsLastStep, RemainingSteps

    from threadloom.graph import END, START, StateGraph

    S = TypedDict(  # noqa: UP013 (same shape as _state, LangGraph's managers)
        "S",
        {"log": Annotated[list, operator.add], "rs": RemainingSteps, "last": IsLastStep},
    )
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": [[s["rs"], s["last"]]]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: END if s["rs"] < 3 else "a")
    app = g.compile()
    assert app.invoke({"log": []}, {"recursion_limit": 4}) == {"log": [[3, False], [2, False]]}
    assert "rs" not in app.channels


def test_tasks_stream_shows_the_computed_input() -> None:
    def sc(lib, saver, durability):
        app = _loop(lib, saver, lambda s: lib.END if s["remaining_steps"] < 3 else "agent")
        chunks = app.stream({"log": []}, {**CFG, "recursion_limit": 4}, stream_mode="tasks")
        return [("tasks", [{k: v for k, v in c.items() if k != "id"} for c in chunks])]

    h.run_parity(sc)

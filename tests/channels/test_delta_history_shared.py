"""A history listing of an imported LangGraph DeltaChannel thread shares its
ancestor reads: each listed checkpoint used to walk back to the nearest snapshot
with a get_tuple per ancestor (18 s for a 200-step Postgres thread's history)."""

from __future__ import annotations

from typing import Annotated

from langgraph.channels import DeltaChannel as LGDelta
from langgraph.checkpoint.memory import InMemorySaver as LGMemory
from langgraph.graph import StateGraph as LGStateGraph
from typing_extensions import TypedDict

from threadloom.channels import DeltaChannel
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.migrate import import_langgraph
from threadloom.graph import StateGraph

STEPS, FREQ = 60, 25


def extend(state: list, writes: list) -> list:
    return [*state, *writes]


class LGState(TypedDict):
    items: Annotated[list, LGDelta(extend, snapshot_frequency=FREQ)]
    n: int


class TLState(TypedDict):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=FREQ)]
    n: int


def _build(graph_cls, state):
    b = graph_cls(state)
    b.add_node("a", lambda s: {"items": [f"x{s['n']}"], "n": s["n"] + 1})
    b.add_conditional_edges("a", lambda s: "a" if s["n"] < STEPS else "__end__")
    b.add_edge("__start__", "a")
    return b


def test_history_reads_each_ancestor_about_once() -> None:
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": STEPS + 10}
    lg = LGMemory()
    lg_graph = _build(LGStateGraph, LGState).compile(checkpointer=lg)
    lg_graph.invoke({"items": [], "n": 0}, cfg)
    saver = InMemorySaver()
    import_langgraph(lg, saver)
    graph = _build(StateGraph, TLState).compile(checkpointer=saver)

    reads = []
    get_tuple = saver.get_tuple

    def counted(config):
        reads.append(config["configurable"].get("checkpoint_id"))
        return get_tuple(config)

    saver.get_tuple = counted
    history = list(graph.get_state_history(cfg))
    expected = [s.values for s in lg_graph.get_state_history(cfg)]
    assert [s.values for s in history] == expected
    assert len(history) == STEPS + 2
    # unshared, every checkpoint between snapshots walked back to one: ~ STEPS * FREQ / 2
    assert len(reads) <= 3 * len(history), len(reads)

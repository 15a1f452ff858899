"""Parity: StateGraph graphs run on threadloom exactly as on LangGraph 1.2.22.

Each scenario builds the same graph with one library's public names and records
what a user can observe (values, stream updates, next, snapshots) plus the raw
stored checkpoints: channel names, version counters, versions_seen, metadata and
pending writes. Ids are compared by order of first appearance (helpers.py), so a
task id that points at the wrong checkpoint or task shows up as a difference.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    n: int


def _counter(version: Any) -> int:
    if isinstance(version, str):
        return int(version.split(".", 1)[0])
    return int(version or 0)


async def astored(saver: Any, config: dict[str, Any] = CFG) -> list[dict[str, Any]]:
    """:func:`stored` through the async API: an async saver's sync methods refuse its own loop."""
    return stored(saver, config, [t async for t in saver.alist(config)])


def stored(
    saver: Any, config: dict[str, Any] = CFG, listed: list[Any] | None = None
) -> list[dict[str, Any]]:
    """Every stored checkpoint of the thread (root namespace first, then oldest first), versions as counters."""
    out = []
    tuples = sorted(
        saver.list(config) if listed is None else listed,
        key=lambda t: (
            t.config["configurable"].get("checkpoint_ns", "") != "",
            t.config["configurable"]["checkpoint_id"],
        ),
    )
    for tup in tuples:
        cp = tup.checkpoint
        meta = {k: v for k, v in tup.metadata.items() if k in ("source", "step", "parents")}
        out.append(
            {
                "id": tup.config["configurable"]["checkpoint_id"],
                "ns": tup.config["configurable"].get("checkpoint_ns", ""),
                "parent": (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "metadata": meta,
                "values": plain(cp["channel_values"]),
                "versions": {k: _counter(v) for k, v in cp["channel_versions"].items()},
                "seen": {
                    node: {k: _counter(v) for k, v in seen.items()}
                    for node, seen in cp["versions_seen"].items()
                },
                "updated": sorted(cp.get("updated_channels") or []),
                "writes": sorted(
                    (_write(*w) for w in tup.pending_writes or []), key=lambda w: (w[1], repr(w[2]))
                ),
            }
        )
    return out


def plain(value: Any) -> Any:
    """Stored values in a library-neutral shape.

    LangGraph's msgpack turns tuples into lists on the way back (threadloom's
    serializer keeps them), and each library has its own ``Overwrite`` class.
    """
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if type(value).__name__ == "Overwrite":
        return {"overwrite": plain(value.value)}
    return value


def _write(task_id: str, channel: str, value: Any) -> tuple[str, str, Any]:
    return (task_id, channel, plain(value))


def updates(graph: Any, value: Any, config: dict[str, Any], **kwargs: Any) -> list[Any]:
    return list(graph.stream(value, config, stream_mode="updates", **kwargs))


def parallel_updates(graph: Any, value: Any, config: dict[str, Any], **kwargs: Any) -> list[Any]:
    """Stream updates in a stable order: parallel tasks of a step finish in any order."""
    return sorted(updates(graph, value, config, **kwargs), key=repr)


def without_barriers(checkpoints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join channel values masked: LangGraph stores them racily (see LG_LIVE_BARRIER)."""
    for cp in checkpoints:
        cp["values"] = {
            k: "<barrier>" if k.startswith("join:") else v for k, v in cp["values"].items()
        }
    return checkpoints


def node(tag: str, **extra: Any):
    def fn(state: dict) -> dict:
        return {"log": [tag], **extra}

    return fn


# -- scenarios --------------------------------------------------------------------------


def sc_linear(lib, saver, durability):
    b = lib.StateGraph(State)
    b.add_node("a", node("a", n=1))
    b.add_node("b", node("b"))
    b.add_edge(lib.START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", lib.END)
    g = b.compile(checkpointer=saver)
    return [
        ("updates", updates(g, {"log": ["in"], "n": 0}, CFG, **h.kw(durability))),
        ("state", g.get_state(CFG)),
        ("stored", stored(saver)),
    ]


def sc_conditional_loop(lib, saver, durability):
    def inc(state: State) -> dict:
        return {"n": state["n"] + 1, "log": [f"inc{state['n']}"]}

    def more(state: State) -> str:
        return "inc" if state["n"] < 3 else "done"

    b = lib.StateGraph(State)
    b.add_node("inc", inc)
    b.add_node("done", node("done"))
    b.add_edge(lib.START, "inc")
    b.add_conditional_edges("inc", more, {"inc": "inc", "done": "done"})
    b.set_finish_point("done")
    g = b.compile(checkpointer=saver)
    return [
        ("invoke", g.invoke({"n": 0, "log": []}, CFG, **h.kw(durability))),
        ("history", list(g.get_state_history(CFG))),
        ("stored", stored(saver)),
    ]


def sc_join(lib, saver, durability):
    b = lib.StateGraph(State)
    for name in ("a", "b", "c", "d"):
        b.add_node(name, node(name))
    b.add_edge(lib.START, "a")
    b.add_edge(lib.START, "b")
    b.add_edge("b", "c")
    b.add_edge(["a", "c"], "d")
    b.add_edge("d", lib.END)
    g = b.compile(checkpointer=saver)
    return [
        ("updates", parallel_updates(g, {"log": []}, CFG, **h.kw(durability))),
        ("stored", without_barriers(stored(saver))),
    ]


def sc_send_map_reduce(lib, saver, durability):
    def fan(state: State) -> list:
        return [lib.Send("work", {"log": [f"item{i}"], "n": i}) for i in range(3)]

    def work(state: State) -> dict:
        return {"log": [f"done{state['n']}"]}

    b = lib.StateGraph(State)
    b.add_node("plan", node("plan"))
    b.add_node("work", work)
    b.add_node("sum", node("sum"))
    b.add_edge(lib.START, "plan")
    b.add_conditional_edges("plan", fan, ["work"])
    b.add_edge("work", "sum")
    g = b.compile(checkpointer=saver)
    return [
        ("invoke", g.invoke({"log": [], "n": 0}, CFG, **h.kw(durability))),
        ("stored", stored(saver)),
    ]


def sc_command(lib, saver, durability):
    def router(state: State):
        return lib.Command(update={"log": ["router"], "n": 5}, goto=["x", "y"])

    def y(state: State):
        return lib.Command(update={"log": ["y"]}, goto=lib.END)

    b = lib.StateGraph(State)
    b.add_node("router", router, destinations=("x", "y"))
    b.add_node("x", node("x"))
    b.add_node("y", y)
    b.add_edge(lib.START, "router")
    g = b.compile(checkpointer=saver)
    return [
        ("updates", parallel_updates(g, {"log": []}, CFG, **h.kw(durability))),
        ("stored", stored(saver)),
    ]


def sc_memory_and_threads(lib, saver, durability):
    b = lib.StateGraph(State)
    b.add_node("a", lambda s: {"log": [f"seen{len(s['log'])}"]})
    b.add_edge(lib.START, "a")
    g = b.compile(checkpointer=saver)
    other = {"configurable": {"thread_id": "t2"}}
    obs = [("t1 #1", g.invoke({"log": ["hi"]}, CFG, **h.kw(durability)))]
    obs.append(("t1 #2", g.invoke({"log": ["again"]}, CFG, **h.kw(durability))))
    obs.append(("t2 #1", g.invoke({"log": ["other"]}, other, **h.kw(durability))))
    obs.append(("t1 state", g.get_state(CFG)))
    obs.append(("t2 stored", stored(saver, other)))
    obs.append(("t1 stored", stored(saver)))
    return obs


def sc_interrupt_resume(lib, saver, durability):
    def ask(state: State) -> dict:
        answer = lib.interrupt({"q": "ok?"})
        return {"log": [f"answer:{answer}"]}

    b = lib.StateGraph(State)
    b.add_node("prep", node("prep"))
    b.add_node("ask", ask)
    b.add_edge(lib.START, "prep")
    b.add_edge("prep", "ask")
    g = b.compile(checkpointer=saver)
    obs = [("first", updates(g, {"log": []}, CFG, **h.kw(durability)))]
    obs.append(("paused", g.get_state(CFG)))
    obs.append(("resume", updates(g, lib.Command(resume="yes"), CFG, **h.kw(durability))))
    obs.append(("stored", stored(saver)))
    return obs


def sc_subgraph(lib, saver, durability):
    class Sub(TypedDict):
        log: Annotated[list[str], operator.add]

    sb = lib.StateGraph(Sub)
    sb.add_node("s1", lambda s: {"log": ["s1"]})
    sb.add_node("s2", lambda s: {"log": ["s2"]})
    sb.add_edge(lib.START, "s1")
    sb.add_edge("s1", "s2")
    sub = sb.compile()
    b = lib.StateGraph(State)
    b.add_node("pre", node("pre"))
    b.add_node("sub", sub)
    b.add_edge(lib.START, "pre")
    b.add_edge("pre", "sub")
    g = b.compile(checkpointer=saver)
    return [
        ("updates", updates(g, {"log": []}, CFG, subgraphs=True, **h.kw(durability))),
        ("state", g.get_state(CFG, subgraphs=True)),
        ("stored", stored(saver)),
    ]


def sc_conditional_entry(lib, saver, durability):
    """A branch on START sees the stored state plus the new input (multi-turn)."""

    def entry(state: State) -> str:
        return "long" if len(state["log"]) > 2 else "short"

    b = lib.StateGraph(State)
    b.add_node("short", node("short"))
    b.add_node("long", node("long"))
    b.add_conditional_edges(lib.START, entry, ["short", "long"])
    g = b.compile(checkpointer=saver)
    obs = [("t1", g.invoke({"log": ["a"]}, CFG, **h.kw(durability)))]
    obs.append(("t2", g.invoke({"log": ["b"]}, CFG, **h.kw(durability))))
    obs.append(("stored", stored(saver)))
    return obs


SCENARIOS = [
    sc_conditional_entry,
    sc_linear,
    sc_conditional_loop,
    sc_join,
    sc_send_map_reduce,
    sc_command,
    sc_memory_and_threads,
    sc_interrupt_resume,
    sc_subgraph,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__[3:])
def test_stategraph_parity(scenario) -> None:
    h.run_parity(scenario)


@pytest.mark.parametrize(
    "scenario", [sc_linear, sc_join, sc_interrupt_resume], ids=lambda f: f.__name__[3:]
)
@pytest.mark.parametrize("durability", h.DURABILITIES)
def test_stategraph_parity_durability(scenario, durability: str) -> None:
    h.run_parity(scenario, "memory", durability)


@pytest.mark.parametrize(
    "scenario", [sc_linear, sc_conditional_loop, sc_interrupt_resume], ids=lambda f: f.__name__[3:]
)
def test_stategraph_parity_sqlite(scenario) -> None:
    h.run_parity(scenario, "sqlite")


def test_oracle_join_channel_layout() -> None:
    """Pin the oracle layout the compiler must reproduce."""
    obs = h.oracle_only(sc_join)
    channels = set().union(*(set(c["versions"]) for c in obs[1][1]))
    assert {
        "__start__",
        "branch:to:a",
        "branch:to:b",
        "branch:to:c",
        "join:a+c:d",
        "log",
    } <= channels


async def sc_async_graph(lib, saver, durability):
    async def inc(state: State) -> dict:
        return {"n": state["n"] + 1, "log": [f"inc{state['n']}"]}

    async def more(state: State) -> str:
        return "inc" if state["n"] < 2 else lib.END

    async def side(state: State) -> dict:
        return {"log": [f"side{state['n']}"]}

    def fan(state: State) -> list:
        return [lib.Send("side", {"n": 10, "log": []}), "inc"]

    b = lib.StateGraph(State)
    b.add_node("start", node("start"))
    b.add_node("inc", inc)
    b.add_node("side", side)
    b.add_edge(lib.START, "start")
    b.add_conditional_edges("start", fan, ["inc", "side"])
    b.add_conditional_edges("inc", more)
    g = b.compile(checkpointer=saver)
    chunks = [c async for c in g.astream({"n": 0, "log": []}, CFG, stream_mode="values")]
    return [
        ("values", chunks),
        ("ainvoke", await g.ainvoke({"log": ["again"]}, CFG)),
        ("state", await g.aget_state(CFG)),
        ("stored", await astored(saver)),
    ]


async def test_stategraph_parity_async() -> None:
    await h.arun_parity(sc_async_graph)

"""Helpers shared by the graph workloads: the saver x durability matrix and invoking."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

from bench.harness import Config, per_call_median
from bench.sides import SAVER_KINDS, Side, pg_url

__all__ = [
    "WARMUP",
    "agent_loop",
    "chain",
    "invoke",
    "median_invoke",
    "saver_matrix",
    "thread",
]

WARMUP = 10  # untimed invokes first: imports, caches, table creation


def saver_matrix(cfg: Config) -> list[tuple[str, str]]:
    """(saver kind, durability) pairs: "none" once, every saver with sync and async."""
    pairs = [("none", "-")]
    for kind in SAVER_KINDS[1:]:
        if kind == "postgres" and not pg_url():
            continue
        pairs += [(kind, "sync"), (kind, "async")]
    return pairs


def thread(tid: str, **extra: Any) -> dict[str, Any]:
    """A run config for thread ``tid``."""
    return {"configurable": {"thread_id": tid}, **extra}


def invoke(graph: Any, inp: Any, config: dict[str, Any], durability: str) -> Any:
    """``graph.invoke`` with ``durability`` unless it is "-" (no checkpointer)."""
    if durability == "-":
        return graph.invoke(inp, config)
    return graph.invoke(inp, config, durability=durability)


def median_invoke(
    side: Side,
    cfg: Config,
    kind: str,
    durability: str,
    builder: Any,
    calls: int,
    run_of: Callable[[int], tuple[Any, str]],
) -> tuple[float, Any]:
    """Median seconds of one ``invoke`` and the last run's final state.

    ``builder`` is compiled on a fresh ``kind`` saver; ``run_of(i)`` gives call
    ``i``'s input and thread id (a new thread per call, so every run pays the
    whole write path from an empty checkpoint). WARMUP untimed calls come first
    (negative ``i``), then ``calls`` calls, each timed on its own.
    """
    with tempfile.TemporaryDirectory(dir=cfg.workdir) as tmp:
        with side.saver(kind, tmp) as saver:
            graph = builder.compile(checkpointer=saver)
            last: list[Any] = [None]

            def one(i: int) -> None:
                inp, tid = run_of(i)
                last[0] = invoke(graph, inp, thread(tid), durability)

            for i in range(WARMUP):
                one(-1 - i)
            return per_call_median(one, calls), last[0]


def chain(side: Side, schema: Any, node: Callable[[Any], Any], n: int) -> Any:
    """A builder of START -> node_0 -> ... -> node_{n-1} -> END on ``schema``,
    every node running ``node``: the superstep chain and LangGraph's
    ``sequential`` shape differ only in state and node."""
    builder = side.get("StateGraph")(schema)
    prev = side.get("START")
    for i in range(n):
        builder.add_node(f"node_{i}", node)
        builder.add_edge(prev, f"node_{i}")
        prev = f"node_{i}"
    builder.add_edge(prev, side.get("END"))
    return builder


def agent_loop(
    side: Side,
    schema: Any,
    agent: Callable[[Any], Any],
    tools: Callable[[Any], Any],
    wants_tool: Callable[[Any], bool],
) -> Any:
    """A builder of START -> agent -> (tools -> agent)* -> END: after ``agent``,
    ``tools`` runs while ``wants_tool(state)``; the conversation workload and
    LangGraph's ``react_agent`` shape differ only in state, nodes and test."""
    end = side.get("END")
    builder = side.get("StateGraph")(schema)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(side.get("START"), "agent")
    builder.add_conditional_edges("agent", lambda s: "tools" if wants_tool(s) else end)
    builder.add_edge("tools", "agent")
    return builder

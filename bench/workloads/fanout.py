"""Workload 2: fan-out of one node to 20 parallel ``Send`` tasks, then a join.

Measures the cost of many tasks in one superstep: task preparation, parallel
execution, 20 ``put_writes`` and applying their writes through a reducer.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from bench.harness import Case, Config, MetricSpec, Outcome
from bench.sides import Side
from bench.workloads.common import median_invoke, saver_matrix

__all__ = ["cases"]

WIDTH = 20


class FanState(TypedDict):
    width: int
    results: Annotated[list, operator.add]
    total: int


def _split(state: FanState) -> dict[str, Any]:
    return {"total": 0}


def _work(arg: dict[str, int]) -> dict[str, list[int]]:
    return {"results": [arg["i"] * arg["i"]]}


def _join(state: FanState) -> dict[str, int]:
    return {"total": sum(state["results"])}


def build_fanout(side: Side):
    """START -> split -(Send x width)-> work -> join -> END."""
    send = side.get("Send")
    builder = side.get("StateGraph")(FanState)
    builder.add_node("split", _split)
    builder.add_node("work", _work)
    builder.add_node("join", _join)
    builder.add_edge(side.get("START"), "split")
    builder.add_conditional_edges(
        "split", lambda s: [send("work", {"i": i}) for i in range(s["width"])]
    )
    builder.add_edge("work", "join")
    builder.add_edge("join", side.get("END"))
    return builder


def _fan_input(i: int) -> tuple[dict[str, Any], str]:
    return {"width": WIDTH, "results": []}, f"fan-{i}"


def _run(kind: str, durability: str):
    def fn(side: Side, cfg: Config) -> Outcome:
        invokes = cfg.share(50, 2)
        builder = build_fanout(side)
        secs, last = median_invoke(side, cfg, kind, durability, builder, invokes, _fan_input)
        return Outcome({"ms/invoke": secs * 1e3}, final=last)

    return fn


def cases(cfg: Config) -> list[Case]:
    return [
        Case("fanout", f"{kind}/{dur}", _run(kind, dur), [MetricSpec("ms/invoke", "ms")])
        for kind, dur in saver_matrix(cfg)
    ]

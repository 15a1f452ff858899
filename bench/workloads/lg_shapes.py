"""Workload 5: the graph shapes of LangGraph's own bench suite, rewritten here.

Same shapes and parameters as ``libs/langgraph/bench`` (sequential_1000,
wide_state_25x300, fanout_to_subgraph_10x, react_agent_10x), written against a
:class:`Side` so both libraries run identical graph code. As in LangGraph's
suite, every run uses a new thread and ``durability="exit"``; the
``memory`` variants are its ``_checkpoint`` variants (InMemorySaver).
Random inputs are replaced by seeded/deterministic ones so final states can be
compared.
"""

from __future__ import annotations

import itertools
import random
import tempfile
from typing import Any

from bench.harness import Case, Config, MetricSpec, Outcome, median_seconds
from bench.sides import Side
from bench.workloads import shapes
from bench.workloads.common import invoke, thread

__all__ = ["cases"]

RECURSION = 10**9


def _sequential(side: Side, cfg: Config) -> tuple[Any, Any]:
    n = cfg.pick(1000, 50)
    return shapes.sequential(side, n), {"messages": []}


def _wide_state(side: Side, cfg: Config) -> tuple[Any, Any]:
    n, width = cfg.pick((300, 5), (20, 2))
    leaf = ["hi?" * 10, True, 1, 6327816386138, None] * 5
    blob = {str(i) * 10: {str(j) * 10: list(leaf) for j in range(width)} for i in range(width)}
    return shapes.wide_state(side, n), {"messages": [blob]}


def _fanout_subgraph(side: Side, cfg: Config) -> tuple[Any, Any]:
    count, size = cfg.pick((10, 1000), (2, 50))
    rng = random.Random(42)
    subjects = [rng.choices("abcdefghijklmnopqrstuvwxyz", k=size) for _ in range(count)]
    return shapes.fanout_to_subgraph(side), {"subjects": subjects}


def _react(side: Side, cfg: Config) -> tuple[Any, Any]:
    from langchain_core.messages import HumanMessage

    n_tools = cfg.pick(10, 3)
    return shapes.react_agent(side, n_tools), {"messages": [HumanMessage("hi?", id="h-0")]}


SHAPES = {
    "sequential_1000": (_sequential, ("none",)),
    "wide_state_25x300": (_wide_state, ("none", "memory")),
    "fanout_to_subgraph_10x": (_fanout_subgraph, ("none", "memory")),
    "react_agent_10x": (_react, ("none", "memory")),
}


def _run(make: Any, kind: str):
    def fn(side: Side, cfg: Config) -> Outcome:
        builder, inp = make(side, cfg)
        counter = itertools.count()
        durability = "-" if kind == "none" else "exit"
        with tempfile.TemporaryDirectory(dir=cfg.workdir) as tmp:
            with side.saver(kind, tmp) as saver:
                graph = builder.compile(checkpointer=saver)
                last: list = []

                def once() -> None:
                    cfg_ = thread(f"shape-{next(counter)}", recursion_limit=RECURSION)
                    last[:] = [invoke(graph, inp, cfg_, durability)]

                secs = median_seconds(once, cfg.pick(max(5, cfg.reps), 1))
        return Outcome({"ms/run": secs * 1e3}, final=last[0])

    return fn


def cases(cfg: Config) -> list[Case]:
    out = []
    for name, (make, kinds) in SHAPES.items():
        for kind in kinds:
            label = name if kind == "none" else f"{name}_checkpoint"
            out.append(Case("lg_shapes", label, _run(make, kind), [MetricSpec("ms/run", "ms")]))
    return out

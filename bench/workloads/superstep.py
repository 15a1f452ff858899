"""Workload 1: per-superstep overhead of a 10-node chain of trivial nodes.

Each invoke runs on a new thread, so every run starts from an empty checkpoint
and pays the full write path: 10 supersteps plus the input checkpoint. The
number reported is the median wall time of one invoke divided by the 10 node
supersteps (medians over the 200 invokes, each timed on its own).
"""

from __future__ import annotations

from typing import TypedDict

from bench import floor
from bench.harness import Case, Config, MetricSpec, Outcome
from bench.sides import Side
from bench.workloads.common import WARMUP, chain, median_invoke, saver_matrix

__all__ = ["NODES", "WARMUP", "build_chain", "cases"]

NODES = 10


class ChainState(TypedDict):
    count: int


def _bump(state: ChainState) -> dict[str, int]:
    return {"count": state["count"] + 1}


def build_chain(side: Side, n: int = NODES):
    """START -> node_0 -> ... -> node_{n-1} -> END; each node adds 1 to ``count``."""
    return chain(side, ChainState, _bump, n)


def _run(kind: str, durability: str):
    def fn(side: Side, cfg: Config) -> Outcome:
        invokes = cfg.share(200, 4)
        builder = build_chain(side)
        secs, last = median_invoke(
            side, cfg, kind, durability, builder, invokes, lambda i: ({"count": 0}, f"chain-{i}")
        )
        return Outcome({"us/superstep": secs / NODES * 1e6}, final=last)

    return fn


def cases(cfg: Config) -> list[Case]:
    """The chain per (saver, durability), then the commit floor of each durable
    store (bench/floor.py: what one durable commit per step leaves of the 3x)."""
    target = ("ratio", 3.0)
    matrix = saver_matrix(cfg)
    chain = [
        Case(
            "superstep",
            f"{kind}/{dur}",
            _run(kind, dur),
            [MetricSpec("us/superstep", "us", target)],
        )
        for kind, dur in matrix
    ]
    return chain + floor.cases(list(dict.fromkeys(kind for kind, _ in matrix)))

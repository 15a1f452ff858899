"""Workload 1b: the superstep chain under ``ainvoke`` with each side's async savers.

The issue's workload 1 is ``invoke``; most agent services run ``ainvoke``, where
sync nodes go to a thread pool and the savers are the async ones
(``AsyncSqliteSaver`` on aiosqlite, ``AsyncPostgresSaver``). Same chain, same
per-invoke median divided by the 10 node supersteps; target: not slower than
LangGraph ("no workload slower").
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from typing import Any

from bench.asides import asaver
from bench.harness import Case, Config, MetricSpec, Outcome
from bench.sides import Side, pg_url
from bench.workloads.common import thread
from bench.workloads.superstep import NODES, WARMUP, build_chain

__all__ = ["cases"]


async def _ainvoke(graph: Any, i: int, durability: str) -> Any:
    config = thread(f"achain-{i}")
    if durability == "-":
        return await graph.ainvoke({"count": 0}, config)
    return await graph.ainvoke({"count": 0}, config, durability=durability)


async def _measure(side: Side, kind: str, durability: str, invokes: int, workdir: str) -> Any:
    async with asaver(side, kind, workdir) as saver:
        graph = build_chain(side).compile(checkpointer=saver)
        for i in range(WARMUP):
            await _ainvoke(graph, -1 - i, durability)
        times, last = [], None
        for i in range(invokes):
            t0 = time.perf_counter()
            last = await _ainvoke(graph, i, durability)
            times.append(time.perf_counter() - t0)
    return statistics.median(times), last


def _run(kind: str, durability: str):
    def fn(side: Side, cfg: Config) -> Outcome:
        invokes = cfg.share(100, 4)
        with tempfile.TemporaryDirectory(dir=cfg.workdir) as tmp:
            secs, last = asyncio.run(_measure(side, kind, durability, invokes, tmp))
        return Outcome({"us/superstep": secs / NODES * 1e6}, final=last)

    return fn


def cases(cfg: Config) -> list[Case]:
    pairs = [("none", "-"), ("memory", "sync"), ("sqlite-normal", "sync")]
    pairs += [("sqlite-normal", "async"), ("sqlite-full", "sync")]
    if pg_url():
        pairs += [("postgres", "sync"), ("postgres", "async")]
    target = ("ratio", 1.0)
    return [
        Case("asuperstep", f"{k}/{d}", _run(k, d), [MetricSpec("us/superstep", "us", target)])
        for k, d in pairs
    ]

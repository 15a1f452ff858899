"""Saver hot-path cost: threadloom vs LangGraph, per call and per superstep.

Not a test (no timing assertions belong in the suite): run it by hand::

    .venv/bin/python tests/storage/measure_speed.py [calls|chain|all]

``calls``: the exact ``put``/``put_writes`` calls LangGraph's runtime makes for
a 10-node StateGraph chain are recorded once, then replayed into both
InMemorySavers (and both SQLite savers); reports microseconds of CPU per
``put``, ``put_writes`` and ``get_tuple`` (latest checkpoint).

``chain``: the same chain run by each library with its own savers (memory,
SQLite synchronous=NORMAL), durability sync and async, in one process, side by
side; reports CPU microseconds per superstep (best of several rounds).
"""

from __future__ import annotations

import copy
import importlib
import os
import sqlite3
import sys
import tempfile
import time
from typing import Any, TypedDict

NODES = 10
_OPEN: list[Any] = []  # keeps context managers (and their connections) alive


class ChainState(TypedDict):
    count: int


def _bump(state: ChainState) -> dict[str, int]:
    return {"count": state["count"] + 1}


def build(package: str, saver: Any) -> Any:
    graph = importlib.import_module(f"{package}.graph")
    builder = graph.StateGraph(ChainState)
    prev = graph.START
    for i in range(NODES):
        builder.add_node(f"node_{i}", _bump)
        builder.add_edge(prev, f"node_{i}")
        prev = f"node_{i}"
    builder.add_edge(prev, graph.END)
    return builder.compile(checkpointer=saver)


def memory_saver(package: str) -> Any:
    return importlib.import_module(f"{package}.checkpoint.memory").InMemorySaver()


def sqlite_saver(package: str, path: str) -> Any:
    mod = importlib.import_module(f"{package}.checkpoint.sqlite")
    if package == "threadloom":
        ctx = mod.SqliteSaver.from_conn_string(path, synchronous="NORMAL")
        _OPEN.append(ctx)
        return ctx.__enter__()
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    saver = mod.SqliteSaver(conn)
    saver.setup()
    return saver


def record_calls() -> list[tuple[str, tuple]]:
    """put/put_writes calls LangGraph's runtime makes for one chain run."""
    from langgraph.checkpoint.memory import InMemorySaver

    log: list[tuple[str, tuple]] = []

    class Recorder(InMemorySaver):
        def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
            log.append(("put", copy.deepcopy((config, checkpoint, metadata, new_versions))))
            return super().put(config, checkpoint, metadata, new_versions)

        def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
            log.append(("put_writes", copy.deepcopy((config, writes, task_id, task_path))))
            return super().put_writes(config, writes, task_id, task_path)

    build("langgraph", Recorder()).invoke(
        {"count": 0}, {"configurable": {"thread_id": "rec"}}, durability="sync"
    )
    return log


def replay(saver: Any, calls: list[tuple[str, tuple]], tid: str) -> dict[str, list[float]]:
    """Replay calls on thread ``tid``, rewriting config ids; CPU seconds per method."""
    times: dict[str, list[float]] = {"put": [], "put_writes": [], "get_tuple": []}
    ids: dict[str | None, str | None] = {None: None}
    last: dict[str, Any] = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    clock = time.process_time
    for method, args in calls:
        conf = dict(args[0]["configurable"])
        conf["thread_id"] = tid
        conf["checkpoint_id"] = ids.get(conf.get("checkpoint_id"))
        config = {"configurable": conf}
        if method == "put":
            checkpoint = dict(args[1])
            t = clock()
            last = saver.put(config, checkpoint, args[2], args[3])
            times["put"].append(clock() - t)
            ids[args[1]["id"]] = last["configurable"]["checkpoint_id"]
        else:
            t = clock()
            saver.put_writes(config, *args[1:])
            times["put_writes"].append(clock() - t)
    latest = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    t = clock()
    saver.get_tuple(latest)
    times["get_tuple"].append(clock() - t)
    return times


def measure_calls(saver: Any, calls: list[tuple[str, tuple]], runs: int = 300) -> dict[str, float]:
    """Mean CPU microseconds per call, best of 5 rounds of ``runs`` replays."""
    best: dict[str, float] = {}
    for r in range(5):
        totals: dict[str, list[float]] = {"put": [], "put_writes": [], "get_tuple": []}
        for i in range(runs):
            for key, ts in replay(saver, calls, f"t{r}-{i}").items():
                totals[key].extend(ts)
        for k, v in totals.items():
            best[k] = min(best.get(k, float("inf")), sum(v) / len(v) * 1e6)
    return best


def calls_report() -> None:
    calls = record_calls()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for package in ("langgraph", "threadloom"):
            rows.append((package, "memory", measure_calls(memory_saver(package), calls, 100)))
            path = os.path.join(tmp, f"{package}.db")
            rows.append((package, "sqlite", measure_calls(sqlite_saver(package, path), calls, 40)))
    print(f"{'saver':24} {'us/put':>8} {'us/put_writes':>14} {'us/get_tuple':>13}")
    for package, kind, r in rows:
        name = f"{package}/{kind}"
        print(f"{name:24} {r['put']:8.1f} {r['put_writes']:14.1f} {r['get_tuple']:13.1f}")


def chain_step(graph: Any, durability: str | None, reps: int, rounds: int = 5) -> float:
    counter = [0]

    def once() -> None:
        counter[0] += 1
        conf = {"configurable": {"thread_id": f"c{counter[0]}"}}
        if durability is None:
            graph.invoke({"count": 0}, conf)
        else:
            graph.invoke({"count": 0}, conf, durability=durability)

    for _ in range(10):
        once()
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(reps):
            once()
        best = min(best, (time.process_time() - t) / reps / NODES * 1e6)
    return best


def chain_report() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'case':26} {'langgraph':>10} {'threadloom':>11} {'ratio':>6}  (CPU us/superstep)")
        cases = [("none", None, None)]
        for kind in ("memory", "sqlite"):
            for durability in ("sync", "async"):
                cases.append((f"{kind}/{durability}", kind, durability))
        for name, kind, durability in cases:
            got = []
            for package in ("langgraph", "threadloom"):
                if kind is None:
                    saver = None
                elif kind == "memory":
                    saver = memory_saver(package)
                else:
                    saver = sqlite_saver(package, os.path.join(tmp, f"{package}-{name[7:]}.db"))
                reps = 40 if kind == "sqlite" else 100
                got.append(chain_step(build(package, saver), durability, reps))
            print(f"{name:26} {got[0]:10.1f} {got[1]:11.1f} {got[0] / got[1]:6.2f}x")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("calls", "all"):
        calls_report()
    if what in ("chain", "all"):
        chain_report()

"""Bounded load test: several processes hammer one store, some threads contended.

``python -m tests.concurrency.load [--backend sqlite|postgres] [--procs 4]
[--threads 50] [--steps 20] [--pg URL]`` (loopback only). Each process runs a
``steps``-node graph once on each of its own ``threads`` thread ids, and
competes with every other process for a few shared *hot* threads, with
``multitask_strategy`` "reject", "enqueue" and "interrupt" in turn. Afterwards
every thread's history is checked: one linear chain (no fork: no two
checkpoints share a parent); per run (metadata ``run_id``) exactly
``steps + 2`` checkpoints, fewer only for a run another one interrupted; each
run's marker exactly once in the final state and one node update per stored
step; every contention answered per its strategy (reject: ThreadBusyError;
enqueue/interrupt: ran, unless a later "interrupt" stopped it).
Prints throughput and latency; :func:`run` is what the test calls small.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import operator
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, TypedDict

from threadloom.errors import LeaseLostError, ThreadBusyError
from threadloom.graph import END, START, StateGraph

__all__ = ["run", "verify"]


class LoadState(TypedDict):
    runs: Annotated[list[str], operator.add]
    n: Annotated[int, operator.add]


def build(steps: int) -> Any:
    builder = StateGraph(LoadState)
    names = [f"n{i}" for i in range(steps)]
    for name in names:
        builder.add_node(name, lambda s: {"n": 1})
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder


def _hot_plan(proc: int, hot: list[str], rounds: int) -> list[tuple[str, str]]:
    strategies = ["reject", "enqueue", "interrupt"]
    return [(t, strategies[(r + i + proc) % 3]) for r in range(rounds) for i, t in enumerate(hot)]


def worker(args: dict[str, Any]) -> dict[str, Any]:
    """One process: its own threads plus the hot ones; returns what happened."""
    from tests.concurrency.backends import open_saver

    out: dict[str, Any] = {"ok": [], "rejected": [], "stopped": [], "errors": [], "latency": []}
    with open_saver(args["spec"]) as saver:
        graph = build(args["steps"]).compile(checkpointer=saver)
        jobs = [(f"p{args['proc']}-t{i}", "reject") for i in range(args["threads"])]
        hot = _hot_plan(args["proc"], args["hot"], args["rounds"])
        jobs = hot + jobs  # every process starts on the hot threads: contention

        def one(job: tuple[str, str]) -> None:
            thread, strategy = job
            marker = uuid.uuid4().hex[:12]
            cfg = {"configurable": {"thread_id": thread, "run_id": marker}}
            t0 = time.perf_counter()
            try:
                graph.invoke(
                    {"runs": [marker]},
                    cfg,
                    multitask_strategy=strategy,
                    multitask_timeout=60,
                    lease=args["leases"],
                )
            except LeaseLostError:  # an "interrupt" run stopped this one
                out["stopped"].append((thread, strategy, marker))
                return
            except ThreadBusyError:
                out["rejected"].append((thread, strategy))
                return
            except Exception as exc:  # reported, fails verification
                out["errors"].append(f"{thread}: {type(exc).__name__}: {exc}")
                return
            out["latency"].append(time.perf_counter() - t0)
            out["ok"].append((thread, strategy, marker))

        with ThreadPoolExecutor(args["workers"]) as pool:
            list(pool.map(one, jobs))
    return out


def verify(spec: dict[str, Any], results: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    """Check every thread's history against what the processes reported."""
    from tests.concurrency.backends import open_saver

    problems: list[str] = [e for r in results for e in r["errors"]]
    ok: dict[str, list[str]] = {}
    stopped: dict[str, list[str]] = {}
    for r in results:
        for thread, _strategy, marker in r["ok"]:
            ok.setdefault(thread, []).append(marker)
        for thread, _strategy, marker in r["stopped"]:
            stopped.setdefault(thread, []).append(marker)
        for thread, strategy in r["rejected"]:
            if strategy != "reject":
                problems.append(f"{thread}: {strategy} run was refused")
    checkpoints = 0
    with open_saver(spec) as saver:
        for thread in sorted(set(ok) | set(stopped)):
            rows = list(saver.list({"configurable": {"thread_id": thread}}))
            checkpoints += len(rows)
            problems += _check_thread(
                thread, rows, ok.get(thread, []), stopped.get(thread, []), steps
            )
    return {"problems": problems, "checkpoints": checkpoints}


def _check_thread(
    thread: str, rows: list[Any], ok: list[str], stopped: list[str], steps: int
) -> list[str]:
    """One linear history; per run (metadata ``run_id``) input + START + one checkpoint
    per node (fewer for a run stopped by "interrupt"); each run's marker once in the state."""
    problems = []
    parents = [r.parent_config["configurable"]["checkpoint_id"] for r in rows if r.parent_config]
    if len(parents) != len(set(parents)) or len(rows) - len(parents) != 1:
        problems.append(f"{thread}: history forked or broken")
    per_run = Counter(r.metadata.get("run_id") for r in rows)
    for marker in ok:
        if per_run[marker] != steps + 2:
            problems.append(f"{thread}: run {marker} has {per_run[marker]} checkpoints")
    for marker in stopped:
        if not 1 <= per_run[marker] < steps + 2:
            problems.append(f"{thread}: stopped run {marker} has {per_run[marker]} checkpoints")
    if set(per_run) - set(ok) - set(stopped):
        problems.append(f"{thread}: checkpoints of unknown runs")
    state = rows[0].checkpoint["channel_values"] if rows else {}
    applied = ok + [m for m in stopped if per_run[m] >= 2]  # stopped before START: input unused
    if sorted(state.get("runs", [])) != sorted(applied):
        problems.append(f"{thread}: final state lost or repeated a run")
    if state.get("n") != sum(max(0, per_run[m] - 2) for m in ok + stopped):
        problems.append(f"{thread}: node updates lost or repeated")
    return problems


def run(
    spec: dict[str, Any],
    procs: int = 4,
    threads: int = 50,
    steps: int = 20,
    hot: int = 2,
    rounds: int = 4,
    workers: int = 4,
    leases: bool = True,
) -> dict[str, Any]:
    """Run the load, verify it, return a report (``problems`` must be empty)."""
    hot_ids = [f"hot-{i}" for i in range(hot)]
    jobs = [
        {"spec": spec, "proc": p, "threads": threads, "steps": steps, "hot": hot_ids}
        | {"rounds": rounds, "workers": workers, "leases": leases}
        for p in range(procs)
    ]
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        results = pool.map(worker, jobs)
    elapsed = time.perf_counter() - t0
    report = verify(spec, results, steps)
    latency = sorted(x for r in results for x in r["latency"])
    ok = len(latency)
    report.update(
        backend=spec["kind"],
        runs_ok=ok,
        rejected=sum(len(r["rejected"]) for r in results),
        stopped=sum(len(r["stopped"]) for r in results),
        seconds=round(elapsed, 2),
        runs_per_s=round(ok / elapsed, 1),
        steps_per_s=round(ok * steps / elapsed, 1),
        p50_ms=round(statistics.median(latency) * 1000, 1) if latency else None,
        p95_ms=round(latency[int(0.95 * (ok - 1))] * 1000, 1) if latency else None,
    )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pg", default=os.environ.get("THREADLOOM_TEST_PG"))
    parser.add_argument(
        "--no-leases", action="store_true", help="LangGraph's behaviour: expect lost runs"
    )
    a = parser.parse_args()
    if a.backend == "sqlite":
        spec = {"kind": "sqlite", "path": os.path.join(tempfile.mkdtemp(), "load.db")}
    else:
        if not a.pg:
            parser.error("--pg URL (or THREADLOOM_TEST_PG) is needed for postgres")
        spec = {"kind": "postgres", "url": a.pg, "schema": f"tl_load_{uuid.uuid4().hex[:8]}"}
        spec["pool"] = True
    try:
        report = run(spec, a.procs, a.threads, a.steps, leases=not a.no_leases)
    finally:
        if a.backend == "postgres":
            from tests.concurrency.backends import _drop_schema

            _drop_schema(a.pg, spec["schema"])
    print(json.dumps(report, indent=2))
    raise SystemExit(1 if report["problems"] else 0)


if __name__ == "__main__":
    main()

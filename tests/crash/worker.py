"""Crash-test worker: runs (or resumes) a graph whose nodes have side effects
recorded OUTSIDE the thread, so the parent can SIGKILL it anywhere.

``python -m tests.crash.worker '<json args>'``; args: ``spec`` (see
tests/concurrency/backends.py), ``thread``, ``effects`` (append-only file: one
``<node>`` line per side effect, fsynced), ``reported`` (one line per task the
stream reported done), ``seed`` (node delays). Prints ``ready`` once imported.
"""

from __future__ import annotations

import json
import operator
import os
import random
import sys
import time
from typing import Annotated, Any, TypedDict

from threadloom.graph import END, START, StateGraph

FANOUT = ("p1", "p2", "p3")
CHAIN = ("s0", *FANOUT, "s4", "s5", "s6", "s7")


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def build(effects: str, seed: int) -> StateGraph:
    """s0 -> (p1, p2, p3 in one step) -> s4 -> s5 -> s6 -> s7; every node sleeps a
    little, performs its side effect (appends its name to ``effects``) and writes it."""
    rng = random.Random(seed)
    delays = {name: rng.uniform(0.0, 0.03) for name in CHAIN}
    builder = StateGraph(State)

    def make(name: str) -> Any:
        def node(state: State) -> dict[str, Any]:
            time.sleep(delays[name])
            _append(effects, name)  # the side effect
            time.sleep(delays[name] / 2)
            return {"log": [name]}

        return node

    for name in CHAIN:
        builder.add_node(name, make(name))
    builder.add_edge(START, "s0")
    for p in FANOUT:
        builder.add_edge("s0", p)
    builder.add_edge(list(FANOUT), "s4")
    for a, b in zip(("s4", "s5", "s6"), ("s5", "s6", "s7")):
        builder.add_edge(a, b)
    builder.add_edge("s7", END)
    return builder


def expected_log() -> list[str]:
    return list(CHAIN)


def run(args: dict[str, Any], saver: Any) -> Any:
    """Start the thread or resume it with ``invoke(None)``; record reported tasks."""
    graph = build(args["effects"], args["seed"]).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": args["thread"]}}
    start = None if saver.get_tuple(cfg) is not None else {"log": []}
    durability = args.get("durability", "sync")
    for chunk in graph.stream(start, cfg, stream_mode="updates", durability=durability):
        for node in chunk:
            if not node.startswith("__"):  # "__metadata__": replayed, not run
                _append(args["reported"], node)
    return graph.get_state(cfg).values


def main() -> None:
    from tests.concurrency.backends import open_saver

    args = json.loads(sys.argv[1])
    with open_saver(args["spec"]) as saver:
        print("ready", flush=True)
        run(args, saver)
    print("done", flush=True)


if __name__ == "__main__":
    main()

"""The data an earlier threadloom wrote, for the schema-upgrade tests (SQLite, Postgres).

``write_history`` runs a small StateGraph through a saver with leases off (the
earlier schema has no lease table): several threads, an interrupt inside a
parallel step (so a finished sibling's pending writes are stored), a fork made
by ``update_state`` from an older checkpoint, and a long list channel (list
deltas). ``snapshot`` reads back everything a saver returns for those threads;
``resume_all`` answers every open interrupt and finishes the runs.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from threadloom.graph import END, START, StateGraph
from threadloom.types import Command, interrupt

THREADS = ("t-a", "t-b", "t-c")
ROUNDS = 3


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    answers: Annotated[list[str], operator.add]


def _grow(state: State) -> dict[str, Any]:
    n = len(state["log"])
    return {"log": [f"entry {n:03d} " + "x" * 80]}  # > 64 bytes: blob-backed list chunks


def _ask(state: State) -> dict[str, Any]:
    return {"answers": [interrupt({"question": f"after {len(state['log'])} entries?"})]}


def _side(state: State) -> dict[str, Any]:
    return {"log": ["side " + "y" * 70]}


def graph(saver: Any) -> Any:
    """``grow -> (ask || side) -> grow2 -> END``: ``ask`` interrupts while ``side`` finishes."""
    builder = StateGraph(State)
    builder.add_node("grow", _grow)
    builder.add_node("ask", _ask)
    builder.add_node("side", _side)
    builder.add_node("grow2", _grow)
    builder.add_edge(START, "grow")
    builder.add_edge("grow", "ask")
    builder.add_edge("grow", "side")
    builder.add_edge(["ask", "side"], "grow2")
    builder.add_edge("grow2", END)
    return builder.compile(checkpointer=saver)


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def write_history(saver: Any) -> None:
    """Runs of each thread, each ending at an open interrupt; one fork per thread.
    Leases are off: the earlier schema has no lease table."""
    saver.leases = False
    g = graph(saver)
    for i, thread in enumerate(THREADS):
        g.invoke({"log": [f"start {thread}"], "answers": []}, cfg(thread))
        for r in range(ROUNDS + i):
            g.invoke(Command(resume=f"{thread}-answer-{r}"), cfg(thread))
            g.invoke({"log": [f"more {r}"]}, cfg(thread))
        # a fork: edit an older checkpoint (the head moves to the new branch), run it
        # on to the next interrupt
        old = list(g.get_state_history(cfg(thread)))[4].config
        g.update_state(old, {"log": [f"fork of {thread}"]}, as_node="grow")
        g.invoke(None, cfg(thread))


def snapshot(saver: Any) -> dict[str, Any]:
    """Every checkpoint tuple (checkpoint, metadata, parents, pending writes) of every
    thread, and what the graph reads: current state and full history."""
    g = graph(saver)
    out: dict[str, Any] = {}
    for thread in THREADS:
        tuples = [
            (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
            for t in saver.list(cfg(thread))
        ]
        state = g.get_state(cfg(thread))
        history = [
            (s.values, s.next, s.config, s.metadata) for s in g.get_state_history(cfg(thread))
        ]
        out[thread] = {
            "tuples": tuples,
            "values": state.values,
            "next": state.next,
            "interrupts": [i.value for i in state.interrupts],
            "history": history,
        }
    return out


def resume_all(saver: Any) -> dict[str, Any]:
    """Answer each thread's open interrupt, then run once more; return final values."""
    g = graph(saver)
    finals = {}
    for thread in THREADS:
        g.invoke(Command(resume=f"{thread}-after-upgrade"), cfg(thread))
        finals[thread] = g.invoke({"log": ["post-upgrade run"]}, cfg(thread))
        g.invoke(Command(resume=f"{thread}-second"), cfg(thread))
        finals[thread] = g.get_state(cfg(thread)).values
    return finals


def has_fork(snap: dict[str, Any]) -> bool:
    """Whether some checkpoint of the thread has two children."""
    parents = [t[3]["configurable"]["checkpoint_id"] for t in snap["tuples"] if t[3]]
    return len(parents) != len(set(parents))

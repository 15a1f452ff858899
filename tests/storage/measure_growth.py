"""Storage growth of a long conversation: threadloom SqliteSaver vs LangGraph's.

Not a test (no timing assertions belong in the suite): run it by hand::

    .venv/bin/python tests/storage/measure_growth.py [turns]

It runs LangGraph's own agent loop (START -> agent -> tools -> agent -> END,
2 messages of ~200 bytes per turn) once against a recording saver, then replays
exactly the same ``put``/``put_writes`` calls into both SQLite savers and
reports bytes in use, the growth exponent, save time per turn and the number
of SQL statements a latest-state load takes.
"""

from __future__ import annotations

import math
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Annotated, Any, TypedDict

CHECKPOINTS = (100, 300, 1000)
FILLER = "lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 5


def record(turns: int) -> list[tuple[int, str, tuple]]:
    """The saver calls LangGraph makes for ``turns`` turns: (turn, method, args)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    State = TypedDict(  # noqa: UP013 (functional form: the reducer is a local name)
        "State",
        {
            "messages": Annotated[list, add_messages],
            "pending_tool": Any,
            "tool_result": Any,
            "turn": int,
        },
    )

    def agent(s: dict[str, Any]) -> dict[str, Any]:
        if s.get("tool_result") is None:
            return {"pending_tool": "lookup"}
        text = (f"answer {s['turn']}: " + FILLER)[:200]
        return {"messages": [AIMessage(content=text, id=f"a-{s['turn']}")], "tool_result": None}

    def tools(s: dict[str, Any]) -> dict[str, Any]:
        return {"pending_tool": None, "tool_result": f"lookup result for turn {s['turn']}"}

    log: list[tuple[int, str, tuple]] = []
    turn_box = [0]

    class Recorder(BaseCheckpointSaver):
        last = None
        get_next_version = InMemorySaver.get_next_version

        def get_tuple(self, config):
            return self.last

        def list(self, config, **kw):
            return iter(())

        def put(self, config, checkpoint, metadata, new_versions):
            cp = {
                **checkpoint,
                "channel_values": dict(checkpoint["channel_values"]),
                "channel_versions": dict(checkpoint["channel_versions"]),
                "versions_seen": {k: dict(v) for k, v in checkpoint["versions_seen"].items()},
            }
            log.append((turn_box[0], "put", (config, cp, dict(metadata), dict(new_versions))))
            conf = config["configurable"]
            cfg = {"configurable": {**conf, "checkpoint_id": checkpoint["id"]}}
            self.last = CheckpointTuple(cfg, cp, metadata, config, [])
            return cfg

        def put_writes(self, config, writes, task_id, task_path=""):
            log.append((turn_box[0], "put_writes", (config, list(writes), task_id, task_path)))

    b = StateGraph(State)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s.get("pending_tool") else END)
    b.add_edge("tools", "agent")
    graph = b.compile(checkpointer=Recorder())
    config = {"configurable": {"thread_id": "conversation"}}
    for turn in range(1, turns + 1):
        turn_box[0] = turn
        human = HumanMessage(content=(f"question {turn}: " + FILLER)[:200], id=f"h-{turn}")
        graph.invoke({"messages": [human], "turn": turn}, config, durability="sync")
    return log


def used_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        return (pages - free) * conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def exponent(sizes: dict[int, int]) -> float:
    pts = [(math.log(n), math.log(b)) for n, b in sizes.items()]
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def replay(saver: Any, path: str, log: list, marks: tuple[int, ...]) -> dict[str, Any]:
    base = used_bytes(path)
    sizes: dict[int, int] = {}
    per_turn: dict[int, float] = {}
    last_turn = 0
    for turn, method, args in log:
        if turn != last_turn and last_turn in marks:
            sizes[last_turn] = used_bytes(path) - base
        last_turn = turn
        t0 = time.perf_counter()
        getattr(saver, method)(*args)
        per_turn[turn] = per_turn.get(turn, 0.0) + time.perf_counter() - t0
    sizes[last_turn] = used_bytes(path) - base
    turns = sorted(per_turn)
    return {
        "sizes": sizes,
        "exponent": exponent(sizes) if len(sizes) > 1 else None,
        "save_ms_start": statistics.median(per_turn[t] for t in turns[:10]) * 1e3,
        "save_ms_end": statistics.median(per_turn[t] for t in turns[-10:]) * 1e3,
    }


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    marks = tuple(n for n in CHECKPOINTS if n < turns) + (turns,)
    t0 = time.perf_counter()
    log = record(turns)
    print(f"recorded {len(log)} saver calls in {time.perf_counter() - t0:.1f}s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        from threadloom.checkpoint.sqlite import SqliteSaver

        path = os.path.join(tmp, "threadloom.db")
        statements: list[str] = []
        with SqliteSaver.from_conn_string(path) as saver:
            ours = replay(saver, path, log, marks)
            saver.executor.tracer = lambda sql, params: statements.append(sql)
            saver.codec.chunks.clear()
            saver.codec.manifests.clear()
            tup = saver.get_tuple({"configurable": {"thread_id": "conversation"}})
            ours["latest_load_statements"] = len(statements)
            ours["messages"] = len(tup.checkpoint["channel_values"]["messages"])
        print("threadloom", ours, flush=True)
        if os.environ.get("SKIP_LANGGRAPH"):
            return
        from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

        path = os.path.join(tmp, "langgraph.db")
        with LGSqliteSaver.from_conn_string(path) as lg:
            lg.setup()
            theirs = replay(lg, path, log, marks)
        print("langgraph ", theirs, flush=True)


if __name__ == "__main__":
    main()

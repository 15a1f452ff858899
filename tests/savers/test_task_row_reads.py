"""A ``put_writes`` merging into its task's existing row reads that row only.

A resumed Send fan-out of W tasks, every 10th interrupted, merges W/10 tasks'
results into rows of a checkpoint holding W rows. The merge used to read the
checkpoint's every row to find its own (``LoadWrites`` of the checkpoint), so
the resume read W x W/10 rows (SQLite, W=4,000: 6.8 s against LangGraph's
2 s). It now asks for the task's row (``LoadWrites.task_id``: the primary
key's last column), on every backend. The tests count the rows each
``LoadWrites`` returns: structural, no timing."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from typing_extensions import TypedDict

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.storage import ops
from threadloom.constants import INTERRUPT
from threadloom.graph import START, StateGraph
from threadloom.types import Command, Send, interrupt

TASKS = 40
BIG = "v" * 300  # above every backend's inline limit: a blob with a reference count


@contextmanager
def load_writes_reads(raw: Any) -> Iterator[list[tuple[ops.LoadWrites, int]]]:
    """(op, rows returned) of every ``LoadWrites`` the saver's executor runs."""
    ex = getattr(raw, "executor", raw)  # (a Redis saver is its own executor)
    seen: list[tuple[ops.LoadWrites, int]] = []
    execute, aexecute = getattr(ex, "execute", None), getattr(ex, "aexecute", None)

    def counted(op: Any) -> Any:
        result = execute(op)
        if type(op) is ops.LoadWrites:
            seen.append((op, len(result)))
        return result

    async def acounted(op: Any) -> Any:
        result = await aexecute(op)
        if type(op) is ops.LoadWrites:
            seen.append((op, len(result)))
        return result

    if execute is not None:
        ex.execute = counted
    if aexecute is not None:
        ex.aexecute = acounted
    try:
        yield seen
    finally:
        if execute is not None:
            del ex.execute
        if aexecute is not None:
            del ex.aexecute


def _cfg() -> dict[str, Any]:
    return {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


async def test_a_merge_reads_its_task_row_only(saver: Any) -> None:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=1))
    cfg = await saver.put(_cfg(), cp, {}, {})
    for i in range(TASKS):
        await saver.put_writes(cfg, [("a", i), ("big", f"{BIG}{i}")], f"task-{i}", f"p{i}")
    with load_writes_reads(saver.raw) as reads:
        # merges into task-7's row: an upsert (INTERRUPT), then first-wins (idx 0 kept)
        await saver.put_writes(cfg, [(INTERRUPT, "ask")], "task-7")
        await saver.put_writes(cfg, [("a", "ignored"), ("c", BIG + "new")], "task-7")
    assert reads, "the merges read no row at all"
    for _op, rows in reads:
        assert rows <= 1, f"a merge of one task read {rows} rows of its checkpoint"
    pending = (await saver.get_tuple(cfg)).pending_writes
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task, channel, value in pending:
        by_task.setdefault(task, []).append((channel, value))
    assert len(by_task) == TASKS
    assert by_task["task-7"] == [(INTERRUPT, "ask"), ("a", 7), ("big", f"{BIG}7")]
    for i in range(TASKS):  # the other rows untouched
        if i != 7:
            assert by_task[f"task-{i}"] == [("a", i), ("big", f"{BIG}{i}")]


class S(TypedDict):
    results: Annotated[list, operator.add]


def _fanout(width: int) -> StateGraph:
    def work(arg: dict[str, int]) -> dict[str, Any]:
        i = arg["i"]
        if i % 10 == 0:
            return {"results": [(i, interrupt(f"q{i}"))]}
        return {"results": [(i, "x")]}

    graph = StateGraph(S)
    graph.add_node("work", work)
    graph.add_conditional_edges(
        START, lambda s: [Send("work", {"i": i}) for i in range(width)], ["work"]
    )
    return graph


async def test_resuming_a_fanout_reads_each_task_row_once(saver: Any) -> None:
    """The probe's case: one Command(resume={...}) for W/10 interrupted tasks
    of a W-task fan-out reads about W rows (the resume's own read of the
    checkpoint, then one row per resumed task), not W per resumed task."""
    width = 120
    app = _fanout(width).compile(checkpointer=saver.raw)
    cfg = {"configurable": {"thread_id": "fan"}}
    run = app.invoke if saver.mode == "sync" else app.ainvoke

    async def call(arg: Any) -> Any:
        out = run(arg, cfg)
        return out if saver.mode == "sync" else await out

    first = await call({"results": []})
    asked = first["__interrupt__"]
    assert len(asked) == width // 10
    with load_writes_reads(saver.raw) as reads:
        done = await call(Command(resume={i.id: f"ans-{i.value}" for i in asked}))
    assert sorted(r[0] for r in done["results"]) == list(range(width))
    assert sum(1 for _, a in done["results"] if str(a).startswith("ans-")) == width // 10
    whole = [rows for op, rows in reads if getattr(op, "task_id", None) is None]
    per_task = [rows for op, rows in reads if getattr(op, "task_id", None) is not None]
    assert all(rows <= 1 for rows in per_task), per_task
    # the resume's read of the checkpoint (every task row + the resume map), once
    assert sum(whole) <= width + 2, whole

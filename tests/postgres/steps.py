"""A small put_step chain shared by tests that look at what a step sends
(test_pg_cursor_reuse.py, test_pg_generic_plans.py): one int channel, its
value inline in the record, a task's write of it per step."""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver

__all__ = ["count_parent", "count_steps", "spy_batches"]


def count_parent(saver: PostgresSaver, thread: str) -> dict[str, Any]:
    """An empty first checkpoint of ``thread`` (the steps' parent)."""
    parent = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(parent, empty_checkpoint(), {"step": -1}, {})


def count_steps(saver: PostgresSaver, parent: dict[str, Any], n: int = 3) -> dict[str, Any]:
    """``n`` put_steps after ``parent``: step i writes ``count = i + 1`` and
    stores the checkpoint holding ``count = i``; returns the last config."""
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"count": i}
        cp["channel_versions"] = {"count": str(i + 1)}
        writes = [(parent, [("count", i + 1)], f"t{i}", "")]
        parent = saver.put_step(writes, (parent, cp, {"step": i}, {"count": str(i + 1)}))
    return parent


def spy_batches(monkeypatch: Any, record: Any) -> None:
    """Call ``record(batch)`` with every batch the executor plans for an op
    (the pessimistic plans and the optimistic guesses alike)."""
    from threadloom.checkpoint.postgres.executor import PgExecutor

    prepare, guess = PgExecutor._prepare, PgExecutor._guess

    def spy_prepare(self: Any, op: Any) -> Any:
        batch, decode = prepare(self, op)
        record(batch)
        return batch, decode

    def spy_guess(self: Any, op: Any, tx: Any) -> Any:
        got = guess(self, op, tx)
        if got is not None:
            record(got[0])
        return got

    monkeypatch.setattr(PgExecutor, "_prepare", spy_prepare)
    monkeypatch.setattr(PgExecutor, "_guess", spy_guess)

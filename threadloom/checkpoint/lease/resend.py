"""A run's releasing save sent twice: the second finds the lease gone, yet the
first committed.

An async run cancelled while its last save was in flight keeps that save
queued, and the flush at exit sends it again (docs/concurrency.md, "Release").
When the first send had in fact committed (the server finished the transaction,
the client was cancelled before reading the answer), that transaction also
released the lease, so the second send's fence finds no lease and would report
``LeaseLostError`` ("nothing was written") instead of the cancellation, which
is false: everything was written. On SQLite and Postgres the checkpoint the
release rode with is stored exactly when that transaction committed. On Redis
and in memory (one script / one step at a time) a stored checkpoint may also
mean the save ran but its release did not, and the lease was lost afterwards:
the data is stored and the lease is not ours, so nothing is left to do either.
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.storage.flows import target

__all__ = ["already_saved", "aalready_saved"]


def _target(steps: Any) -> dict[str, Any] | None:
    """The config naming the releasing checkpoint (the last step's), if any."""
    checkpoint = steps[-1][1] if steps else None
    if checkpoint is None:
        return None
    thread_id, ns, _ = target(checkpoint[0])  # the thread id as put stored it
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint[1]["id"],
        }
    }


def already_saved(inner: Any, steps: Any) -> dict[str, Any] | None:
    """The stored checkpoint's config when ``steps`` already committed, else None."""
    target = _target(steps)
    if target is None or inner.get_tuple(target) is None:
        return None
    return target


async def aalready_saved(inner: Any, steps: Any) -> dict[str, Any] | None:
    """Async twin of :func:`already_saved`."""
    target = _target(steps)
    if target is None or await inner.aget_tuple(target) is None:
        return None
    return target

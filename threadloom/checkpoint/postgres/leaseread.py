"""A lease acquire that also reads the thread's latest checkpoint row, in one batch.

A run's first read is the thread's latest checkpoint (``get_tuple``). On
Postgres that read cost a round trip of its own after the acquire's; sent in
the acquire's batch (after the thread's advisory lock and the lease upsert) it
travels with them. The acquire's transaction holds the thread's advisory lock
from its first statement, so no delete or prune of the thread can commit
between this row and the lookups that complete the tuple
(:meth:`threadloom.checkpoint.lease.lease.Lease._acquire_flow`).
"""

from __future__ import annotations

from dataclasses import dataclass

from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.storage import ops

__all__ = ["AcquireRead"]


@dataclass(slots=True)
class AcquireRead(ops.Op):
    """-> ``(LeaseInfo | None, CheckpointRow | None)``: the acquire's result and
    the thread's latest root checkpoint row (read even when the lease is busy:
    the caller then ignores it)."""

    acquire: lo.AcquireLease
    latest: ops.GetCheckpoint

    @property
    def thread_id(self) -> str:  # the executor's advisory lock (``op_thread``)
        return self.acquire.thread_id

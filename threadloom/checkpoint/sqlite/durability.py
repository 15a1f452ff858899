"""Which SQLite commits may skip the fsync: a transaction that writes only the
run's own lease row commits with ``PRAGMA synchronous = NORMAL`` on a
connection configured ``FULL`` (or ``EXTRA``).

Only in WAL mode (the journal mode is read with the level, each time): in a
rollback-journal mode a NORMAL commit may not survive an OS crash in ways the
argument below does not cover, so there every commit stays at FULL.

Why it is safe. ``synchronous`` only matters for an OS crash or power loss;
a process crash loses no committed transaction in WAL mode at any level. An
OS crash kills every process that shares the file (WAL needs shared memory,
so all of them run on this host), so a lease row lost with it belonged to a
dead holder, and the state after reboot is one a crash just before the lease
commit would have left: the previous row (expired or held by a now dead
holder) or none. Nothing durable can depend on the lost row: every later
FULL commit fsyncs the WAL, which holds the lease frames before its own, so
the first checkpoint saved under the lease makes the lease durable too.

The level is read (with the journal mode, one statement) before relaxing and
restored exactly, so a level the caller set on the connection later is kept.
The executor records the restoring PRAGMA before it relaxes and runs it even
when the ROLLBACK before it fails, and the async executor waits for every
transaction-control statement it queued even when its task is cancelled
(aiosqlite's worker runs a queued statement anyway): a cancellation can
neither leave the connection at NORMAL nor leave a transaction open.

Why it matters: a run takes the lease in a transaction of its own before it
reads the thread; at FULL that is one fsync (~270 us here) on top of one per
step (10-node chain: 12 -> 11 fsyncs per invoke).

``PRAGMA synchronous`` cannot change inside a transaction, so the executor
starts a FULL connection's write transaction lazily, at its first op, and
relaxes it when that op is one of :data:`RELAXED`. Later ops may be lease
ops or reads (:data:`READS`: they write nothing; a run's lease acquire reads
the thread's latest checkpoint with it); any other op raises :class:`~threadloom.errors.StorageError` (the transaction rolls back)
rather than commit other rows without their fsync.
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.storage import ops as o
from threadloom.errors import StorageError

__all__ = ["RELAXED", "READS", "RELAX", "LEVEL", "restore_sql", "strict_mode", "check_relaxed"]

# the holder's own lease ops, each alone in its flow (lease/lease.py)
RELAXED = frozenset({lo.AcquireLease, lo.RenewLease, lo.ReleaseLease})
# ops that write nothing: allowed after the first op of a relaxed transaction
# (an acquire reads the thread's latest checkpoint with it, lease/lease.py)
READS = frozenset(
    {
        o.GetCheckpoint,
        o.ListCheckpoints,
        o.LoadAncestors,
        o.FindRunCheckpoints,
        o.LoadRefs,
        o.LoadThreadRefs,
        o.LoadBlobs,
        o.LoadWrites,
        lo.ReadLease,
    }
)
RELAX = "PRAGMA synchronous = NORMAL"
# read before relaxing: the level to restore and the journal mode (WAL only)
LEVEL = "SELECT * FROM pragma_synchronous, pragma_journal_mode"
_RESTORE = {2: "PRAGMA synchronous = FULL", 3: "PRAGMA synchronous = EXTRA"}


def restore_sql(level: int, journal_mode: str = "wal") -> str | None:
    """The PRAGMA that restores ``level`` (as ``PRAGMA synchronous`` reads it)
    after a relaxed commit; None below FULL (nothing to relax) and outside WAL
    mode (the safety argument above needs WAL)."""
    if str(journal_mode).lower() != "wal":
        return None
    return _RESTORE.get(level)


def strict_mode(pragmas: list[str]) -> str | None:
    """The ``PRAGMA synchronous = ...`` statement to restore after a relaxed
    commit, when ``pragmas`` set FULL or EXTRA; else None (nothing to relax)."""
    for sql in pragmas:
        if sql.startswith("PRAGMA synchronous = ") and sql.rsplit(" ", 1)[1] in ("FULL", "EXTRA"):
            return sql
    return None


def check_relaxed(op: Any, where: str) -> None:
    """A relaxed transaction runs lease ops and reads only (see the module docstring)."""
    if type(op) not in RELAXED and type(op) not in READS:
        raise StorageError(
            f"SQLite {where}: {type(op).__name__} in a transaction that commits without"
            " fsync (lease ops only); run it in a transaction of its own"
        )

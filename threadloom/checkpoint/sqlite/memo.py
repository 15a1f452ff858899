"""What a connection already knows: answers to a few lookups, kept across
transactions while nothing else can have changed them.

Every runtime step asks the same three things again: the thread's integer id,
whether the diff base (the previous step's checkpoint) exists, and the thread's
lease row. Each is a statement (and on ``aiosqlite`` a thread hop) whose answer
only changes if someone writes the rows. This memo answers repeats without
SQL, and is dropped the moment that may no longer be true:

* another connection (process) committed: ``PRAGMA data_version`` differs
  (SQLite: unchanged by the connection's own commits, changed by any other's).
  It is read once per transaction, at the first memoized lookup, after the
  transaction's snapshot (write lock) is taken, so nothing else can commit
  between the check and the statements it answers;
* anything else on this connection changed rows (another saver sharing it, the
  caller's own SQL): ``total_changes`` differs from its value after our last
  transaction;
* the transaction was the caller's (a SAVEPOINT: they may still roll it back),
  was rolled back, or a statement deleted rows (mode ``drop``) or wrote the
  lease (mode ``unlease``).

Only positive answers are kept (a row exists); the memo is bounded.
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.storage import ops as o

__all__ = ["ABSENT", "DATA_VERSION", "KNOWN", "Memo", "Reads", "read_key"]

KNOWN = frozenset({"thread", "base", "lease"})
"""Statement modes whose positive answer the memo keeps: ``thread`` (rows of a
thread id lookup), ``base`` (one row: does a checkpoint exist), ``lease`` (the
lease row). Writes that keep it true: ``saved`` (a checkpoint row written: it
exists), ``leased`` (a whole lease row written: ``INSERT`` of thread, holder,
token, expiry, no stop); that end it: ``drop`` (rows deleted: forget
everything), ``unlease`` (the lease row of thread ``params[0]`` changed)."""

DATA_VERSION = "PRAGMA data_version"
LIMIT = 4096  # entries; past it the memo starts over (a few hundred kB at most)


class Memo:
    """One executor's memo (see module docstring)."""

    __slots__ = ("rows", "version", "changes", "checked", "own")

    def __init__(self) -> None:
        self.rows: dict[tuple, Any] = {}
        self.version: Any = None  # data_version when last read
        self.changes: int | None = None  # total_changes after our last transaction
        self.checked = False  # validated in this transaction
        self.own = False  # this transaction is ours (BEGIN), not a savepoint

    def begin(self, own: bool) -> None:
        """An outermost transaction starts; ``own``: BEGIN, not a SAVEPOINT."""
        self.own = own
        if own:
            self.checked = False
        else:  # the caller's transaction: trust nothing before or after it
            self.forget()
            self.checked = True  # within it, answers stay true (its snapshot)

    def end(self, committed: bool, total_changes: int) -> None:
        """The outermost transaction ended: keep the memo only past our own commit.

        Only a transaction that validated the memo may record ``total_changes`` as
        seen: one that never looked (a plain read) would otherwise hide what another
        saver on this connection changed before it; left as is, the stale count makes
        the next validation drop the memo (safe)."""
        if not (committed and self.own):
            self.forget()
        elif self.checked:
            self.changes = total_changes
        self.checked = False

    def forget(self) -> None:
        self.rows.clear()
        self.changes = None

    def validate(self, data_version: Any, total_changes: int) -> None:
        """First lookup of a transaction: drop everything if anyone else wrote."""
        if data_version != self.version or total_changes != self.changes:
            self.rows.clear()
        self.version = data_version
        self.changes = total_changes
        self.checked = True

    def learn(self, mode: str, params: Any, result: Any) -> None:
        """Record a lookup's answer (``mode`` in :data:`KNOWN`) if positive."""
        if result and (mode != "base" or result[0]):
            if len(self.rows) >= LIMIT:
                self.rows.clear()
            self.rows[(mode, *params)] = result

    def wrote(self, mode: str, params: Any) -> None:
        """Account for a write statement of ``mode`` (see :data:`KNOWN`)."""
        if mode == "saved":
            self.rows[("base", *params[:3])] = (1,)
        elif mode == "drop":
            self.rows.clear()
        elif mode == "leased":
            self.rows[("lease", params[0])] = (*params[1:4], "")
        elif mode == "unlease":
            self.rows.pop(("lease", params[0]), None)


ABSENT: Any = object()  # Reads.get: nothing stored for that key
READ_LIMIT = 256  # cached results; past it the cache starts over
READ_ROWS = 32  # longer results are not kept (a page of a long history)


class Reads:
    """Results of the read operations every read repeats (the checkpoint or
    page of checkpoints, their pending writes), kept while the database is
    exactly as it was when they were read.

    A read transaction checks, right after its ``BEGIN`` (the ``PRAGMA`` takes
    its snapshot), that ``PRAGMA data_version`` and the connection's
    ``total_changes`` are both what they were when the results were stored:
    then no connection has committed anything since, and this one has changed
    no row (its own writes, another saver's on it, the caller's SQL, even
    rolled back, all move ``total_changes``), so every stored result is what
    the statement would return now. Otherwise they are all dropped. Rows are
    immutable tuples; lists are handed out as copies."""

    __slots__ = ("results", "stamp", "seen")

    def __init__(self) -> None:
        self.results: dict[tuple, Any] = {}
        self.stamp: tuple[Any, int] | None = None
        self.seen: int | None = None  # total_changes at the last read

    def skip(self, total_changes: int) -> bool:
        """Whether a read should neither check nor keep results (saving its
        ``PRAGMA``): this connection changed rows since its last read, so
        nothing stored holds, and a read right after our own write (the
        runtime's, at an invoke's start) is rarely repeated before the next
        write. The read after it checks and keeps again."""
        if total_changes != self.seen:
            self.seen = total_changes
            self.clear()
            return True
        return False

    def validate(self, data_version: Any, total_changes: int) -> None:
        stamp = (data_version, total_changes)
        if stamp != self.stamp:
            self.results.clear()
            self.stamp = stamp

    def get(self, key: tuple) -> Any:
        """The stored result, a fresh list for lists; ``ABSENT`` when unknown."""
        found = self.results.get(key, ABSENT)
        return list(found) if type(found) is list else found

    def put(self, key: tuple, result: Any) -> None:
        if type(result) is list and len(result) > READ_ROWS:
            return
        if len(self.results) >= READ_LIMIT:
            self.results.clear()
        self.results[key] = list(result) if type(result) is list else result

    def clear(self) -> None:
        self.results.clear()
        self.stamp = None


def read_key(op: Any) -> tuple | None:
    """The key of a read whose result :class:`Reads` keeps, else None."""
    kind = type(op)
    if kind is o.GetCheckpoint:
        return (1, op.thread_id, op.checkpoint_ns, op.checkpoint_id)
    if kind is o.LoadWrites:
        return (2, op.thread_id, op.checkpoint_ns, op.checkpoint_ids, op.task_id)
    if kind is o.ListCheckpoints:
        return (3, op.thread_id, op.checkpoint_ns, op.filter, op.before, op.after, op.limit)
    return None

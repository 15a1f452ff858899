"""Rows vanished mid-read: a read's writes lookup and refs lookup also check
that the checkpoint rows they serve still exist, in the same statement (same
snapshot, no round trip).

A read on an autocommit connection (or at READ COMMITTED) sees one snapshot
per statement. When a ``delete_thread``/``prune`` commits between the
checkpoint row lookup and a later lookup, that lookup comes back without the
rows that were deleted. Neither gap is visible: a checkpoint may have no
pending writes, and a missing ref reads like a channel that has a version but
no value (normal: a trigger channel after it was read). So the checkpoint used
to come back without its values or its writes (storage/rereads.py).

Write rows are deleted only with their checkpoint row, ref rows only in the
transaction that deletes every checkpoint row holding them. So if, in the
snapshot of the lookup, the rows the read found are all still there, so is
everything they hold; if one is gone, the read tore. The executor remembers
the checkpoint rows a read transaction found (:func:`watched`); its writes
statement (every read sends one right after the row lookup, a warm re-read
served from cached recipes included) and its refs statement (a cold read of a
checkpoint with values) then return one extra marker row (all NULL) when any
of them is gone, and :func:`checked`'s decoder raises
:class:`~threadloom.errors.CorruptBlobError`, which the driver answers by
re-running the read in one snapshot (storage/drive.py). Blobs need no check: a
missing blob raises by itself. The common read pays a primary-key probe per
checkpoint row inside statements it sends anyway.

The same module keeps the task rows of pending writes this saver wrote or
read (:func:`known`, :func:`remember`, :func:`remembering`): an optimistic
``put_writes`` guesses its task's row from them instead of guessing "none"
(optimistic.py). A resumed task already has a row (its interrupt), so the
"none" guess was refused at every resume. They are only guesses: every one is
checked by the statement that relies on it, so a stale entry costs a refusal,
never a wrong row. At most :data:`KNOWN_ROWS` rows are kept per saver, the
newest, whatever the fan-out.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any
from weakref import WeakKeyDictionary

from threadloom.checkpoint.postgres.idpack import pack_ordered
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.postgres.stmt import Stmt, Tx
from threadloom.checkpoint.storage import ops
from threadloom.errors import CorruptBlobError

__all__ = [
    "checked",
    "forget",
    "known",
    "known_rows",
    "remember",
    "remember_read",
    "remembering",
    "seen_ids",
    "watched",
]

ROW_OPS = (ops.GetCheckpoint, ops.ListCheckpoints)
Decoder = Callable[[list[Any]], Any]
_ONE = "thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s::bytea"
_EACH = "thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = k.id"
Plan = tuple[list[Stmt], Decoder]


def watched(tx: Tx, op: ops.Op, sql: SQL, prepare: Callable[[ops.Op], Plan]) -> Plan:
    """``op``'s statements and decoder in a read transaction whose statements
    do not share one snapshot: a row lookup's decoder remembers the rows it
    found (a list append), a refs or writes lookup checks that those it serves
    are still there."""
    kind = type(op)
    if tx.seen and (kind is ops.LoadRefs or kind is ops.LoadWrites):
        ids = _served_ids(tx.seen, op)
        if ids:
            batch, decode = prepare(op)
            if kind is ops.LoadWrites:
                decode = remember_read(sql, op, decode)
            if len(batch) == 1:
                cols = sql.REF_COLS if kind is ops.LoadRefs else sql.WRITE_COLS
                return checked(batch[0], decode, sql, (op.thread_id, op.checkpoint_ns), ids, cols)
            return batch, decode
    batch, decode = prepare(op)
    if kind is ops.LoadWrites:
        return batch, remember_read(sql, op, decode)
    if kind not in ROW_OPS:
        return batch, decode

    def remembering(results: list[Any]) -> Any:
        found = decode(results)
        if found:
            if tx.seen is None:
                tx.seen = []
            tx.seen.append(found)
        return found

    return batch, remembering


def _served_ids(seen: list[Any], op: Any) -> set[str]:
    """The checkpoint rows found so far whose refs or writes ``op`` reads: for
    refs every row of its thread/namespace (a ref may be held by any of them),
    for writes the rows it names (``op.checkpoint_ids``)."""
    if type(op) is ops.LoadRefs:
        return seen_ids(seen, op.thread_id, op.checkpoint_ns) if op.keys else set()
    if op.checkpoint_ids is None or op.thread_id is None or op.checkpoint_ns is None:
        return set()
    return seen_ids(seen, op.thread_id, op.checkpoint_ns).intersection(op.checkpoint_ids)


def seen_ids(seen: list[Any], thread_id: str, ns: str) -> set[str]:
    """The ids of the checkpoint rows of (thread, namespace) found so far
    (``seen``: what each row lookup returned, a row or a list of rows)."""
    ids = set()
    for found in seen:
        for row in found if type(found) is list else (found,):
            if row.thread_id == thread_id and row.checkpoint_ns == ns:
                ids.add(row.checkpoint_id)
    return ids


def checked(
    stmt: Stmt, decode: Decoder, sql: SQL, scope: tuple[str, str], ids: set[str], cols: str
) -> Plan:
    """``stmt`` (one lookup of refs or writes, columns ``cols``, ``thread_id``
    first and never NULL) plus one marker row (all NULL) when one of the
    checkpoint rows ``ids`` of ``scope`` (thread, namespace) is gone in its
    snapshot; the decoder raises then, before decoding anything. The rows are
    probed by primary key one by one (``LATERAL ... OFFSET 0``): with
    ``checkpoint_id = ANY(...)`` the planner filtered every row of the thread
    (154 us of execution at 1,000 checkpoints, against 17)."""
    thread, ns = scope
    packed = [pack_ordered(c) for c in ids]
    one = len(packed) == 1
    key = (stmt.sql, cols, one)
    text = _texts.get(key)
    if text is None:
        text = _marked_text(stmt.sql, sql, cols, one)
        if len(_texts) >= 256:  # generated texts stay bounded
            _texts.clear()
        _texts[key] = text
    params = (thread, ns, packed[0]) if one else (packed, thread, ns, len(packed))
    marked = Stmt(text, (*stmt.params, *params), stmt.fetch)

    def unmarked(results: list[Any]) -> Any:
        for row in results[0]:
            if row[0] is None:
                raise CorruptBlobError(
                    "checkpoint deleted while it was read (its refs or writes are gone)",
                    thread_id=thread,
                )
        return decode(results)

    return [marked], unmarked


_texts: dict[tuple[str, str, bool], str] = {}


def _marked_text(text: str, sql: SQL, cols: str, one: bool) -> str:
    """``text`` with the marker row (built once per statement text: psycopg
    keys its caches by the text, and the same string object hashes once)."""
    nulls = ", ".join(["NULL"] * len(cols.split(",")))
    if one:  # a get_tuple: simpler to plan (~15 us less backend CPU)
        gone = f"NOT EXISTS (SELECT FROM {sql.ckpt} WHERE {_ONE})"
    else:
        gone = (
            "(SELECT count(*) FROM unnest(%s::bytea[]) AS k(id) CROSS JOIN LATERAL"
            f" (SELECT 1 FROM {sql.ckpt} WHERE {_EACH} OFFSET 0) c) < %s"
        )
    return f"{text} UNION ALL SELECT {nulls} WHERE {gone}"


# -- task rows of pending writes this saver wrote or read (see the module doc) --

Checkpoint = tuple[str, str, str]  # (thread, namespace, checkpoint id)
KNOWN_ROWS = 4096  # task rows per saver (~1.4 MB); the older rows go when it is full


class _Known:
    """One saver's task rows by checkpoint, and how many there are: the bound
    counts rows, not checkpoints (a fan-out of 1,000 Sends puts 1,000 rows on
    one checkpoint; 1,024 such checkpoints held ~340 MB)."""

    __slots__ = ("by", "n")

    def __init__(self) -> None:
        self.by: dict[Checkpoint, dict[str, ops.WriteRow]] = {}
        self.n = 0


_known: WeakKeyDictionary[SQL, _Known] = WeakKeyDictionary()  # per saver (its SQL)


def _memory(sql: SQL) -> _Known:
    memory = _known.get(sql)
    if memory is None:
        memory = _known[sql] = _Known()
    return memory


def known(
    sql: SQL, thread_id: str, ns: str, checkpoint_id: str, task_id: str | None = None
) -> list[ops.WriteRow]:
    """The task rows of the checkpoint as this saver last wrote or read them
    (with ``task_id``: that task's row, if known; a guess of one row is checked
    against a read of one row, not of the checkpoint's every row)."""
    memory = _known.get(sql)
    tasks = memory.by.get((thread_id, ns, checkpoint_id)) if memory else None
    if not tasks:
        return []
    if task_id is not None:
        row = tasks.get(task_id)
        return [row] if row is not None else []
    return list(tasks.values())


def known_rows(sql: SQL) -> int:
    """How many task rows the saver of ``sql`` keeps (the bound's count)."""
    memory = _known.get(sql)
    return memory.n if memory else 0


def forget(sql: SQL) -> None:
    """Drop every task row the saver of ``sql`` knows (its next guesses are "none")."""
    _known.pop(sql, None)


def remember(sql: SQL, rows: Any) -> None:
    """``rows`` (WriteRows) as a write transaction is about to leave them (an
    optimistic plan's, or a pessimistic ``SaveWrites``'s: after a refusal the
    re-run's write is what the next guess must match)."""
    memory = _known.get(sql) or _memory(sql)
    by = memory.by
    for w in rows:
        key = (w.thread_id, w.checkpoint_ns, w.checkpoint_id)
        tasks = by.get(key)
        if tasks is None:
            tasks = by[key] = {}
        if w.task_id not in tasks:
            memory.n += 1
        tasks[w.task_id] = w
    if memory.n > KNOWN_ROWS:
        _trim(memory)


def _trim(memory: _Known) -> None:
    """Keep the newest half of the rows (a write runs at the thread's tip;
    within one checkpoint the rows written last): cut in one go, which costs a
    write less than an LRU's bookkeeping at every write."""
    room, kept = KNOWN_ROWS // 2, []
    for key in reversed(memory.by):  # newest checkpoint first
        tasks = memory.by[key]
        if len(tasks) > room:
            tasks = dict(islice(tasks.items(), len(tasks) - room, None))
        kept.append((key, tasks))
        room -= len(tasks)
        if room <= 0:
            break
    memory.by = dict(reversed(kept))
    memory.n = KNOWN_ROWS // 2 - room


def remembering(sql: SQL, op: ops.Op, decode: Decoder) -> Decoder:
    """``decode`` also keeping the task rows a write transaction's ``op``
    found (:func:`remember_read`) or wrote (a ``SaveWrites``, pessimistic:
    the re-run after a refusal; without it the next ``put_writes`` of the
    task guessed the row as read BEFORE that write, and was refused again)."""
    if type(op) is ops.SaveWrites:
        rows = op.rows

        def wrote(results: list[Any]) -> Any:
            answer = decode(results)
            if answer is not None:  # None: a strict write that wrote nothing
                remember(sql, rows)
            return answer

        return wrote if rows else decode
    if type(op) is ops.LoadWrites:
        return remember_read(sql, op, decode)
    return decode


def remember_read(sql: SQL, op: ops.LoadWrites, decode: Decoder) -> Decoder:
    """``decode`` also keeping what a read of ONE checkpoint's writes found
    (a run's ``get_tuple`` before it resumes: the interrupted task's row)."""
    ids, ns = op.checkpoint_ids, op.checkpoint_ns
    if ids is None or len(ids) != 1 or ns is None or op.thread_id is None:
        return decode
    key = (op.thread_id, ns, ids[0])
    if op.task_id is not None:  # one task's row: the checkpoint's others stay known
        task = op.task_id

        def remembering_task(results: list[Any]) -> Any:
            found = decode(results)
            memory = _memory(sql)
            tasks = memory.by.get(key)
            if tasks is not None and tasks.pop(task, None) is not None:
                memory.n -= 1
            if found:
                remember(sql, found)
            return found

        return remembering_task

    def remembering(results: list[Any]) -> Any:
        found = decode(results)
        memory = _memory(sql)
        old = memory.by.pop(key, None)
        if old:
            memory.n -= len(old)
        if found:
            memory.by[key] = {w.task_id: w for w in found}
            memory.n += len(memory.by[key])
            if memory.n > KNOWN_ROWS:
                _trim(memory)
        return found

    return remembering

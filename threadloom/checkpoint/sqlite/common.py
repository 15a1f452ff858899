"""Pieces every SQLite plan module shares: the statement type, column lists,
id encoding and small SQL builders (kept apart so reads and writes can live in
separate modules without importing each other)."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from functools import cache
from typing import Any, NamedTuple

from threadloom.checkpoint.storage import ops as o

__all__ = [
    "CHUNK",
    "CP_COLS",
    "REF_COLS",
    "WRITE_COLS",
    "THREAD",
    "Plan",
    "Stmt",
    "enc_id",
    "dec_id",
]

CHUNK = 400  # values per IN (...) list, well under SQLite's variable limit

CP_COLS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, tag, data, metadata, run_id"
)
REF_COLS = "thread_id, checkpoint_ns, channel, version, kind, tag, data, hashes, length, logical"
WRITE_COLS = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, data, hashes"
THREAD = "(SELECT id FROM tl_threads WHERE thread_id = ?)"


class Stmt(NamedTuple):
    """One statement. ``mode``: ``all`` (rows), ``one`` (row|None),
    ``count`` (rowcount), ``many`` (executemany, rowcount), ``each`` (params is
    a list of rows: one execution per row, the list of their rowcounts);
    lookups the executor may answer from its memo (``sqlite/memo.py``):
    ``thread`` (rows), ``base`` and ``lease`` (row|None); writes that tell the
    memo what changed (rowcount): ``saved``, ``drop``, ``leased``, ``unlease``."""

    sql: str
    params: Any = ()
    mode: str = "all"


Plan = Generator[Stmt, Any, Any]

# Both directions of recent conversions: a runtime step encodes the ids it just
# decoded (parent, task ids) and history pages decode the same ids again; a dict
# hit is ~10x cheaper than hex parsing and formatting. Bounded: starts over.
_ENC: dict[Any, bytes] = {}
_DEC: dict[bytes, str] = {}
_KEEP = 1 << 15


def _learn(text: str, raw: bytes) -> None:
    if len(_DEC) >= _KEEP:
        _ENC.clear()
        _DEC.clear()
    _ENC[text] = raw
    _DEC[raw] = text


def enc_id(value: str | None) -> Any:
    """A canonical lowercase UUID string as its 16 bytes (BLOB order = text order
    for these), anything else unchanged; ids are most of a row's key."""
    raw = _ENC.get(value)
    if raw is not None:
        return raw
    if (
        type(value) is str
        and len(value) == 36
        and value[8] == value[13] == value[18] == value[23] == "-"
    ):
        hexdigits = value.replace("-", "")
        try:
            raw = bytes.fromhex(hexdigits)
        except ValueError:
            return value
        # exactly 16 bytes (no dash elsewhere) of lowercase hex: exact round trip
        if len(raw) == 16 and raw.hex() == hexdigits:
            if len(_DEC) >= _KEEP:  # (``_learn`` inlined: a new id every step)
                _ENC.clear()
                _DEC.clear()
            _ENC[value] = raw
            _DEC[raw] = value
            return raw
    return value


def dec_id(value: Any) -> Any:
    if type(value) is bytes:
        text = _DEC.get(value)
        if text is None:
            h = value.hex()
            text = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            _learn(text, value)
        return text
    return value


def _cp_row(r: Sequence[Any]) -> o.CheckpointRow:
    return o.CheckpointRow(r[0], r[1], dec_id(r[2]), dec_id(r[3]), r[4], r[5], r[6], r[7])


def _bound(value: Any) -> Any:
    """``bytes`` as ``bytearray`` (the same BLOB): ``sqlite3`` binds a bytearray
    directly but sends ``bytes`` through its adapter lookup first (~0.45 us a
    parameter). Only for values no memo key holds (those must stay hashable)."""
    return bytearray(value) if type(value) is bytes else value


def _cp_params(row: o.CheckpointRow, thread: Any = None) -> tuple[Any, ...]:
    """The row's parameters; ``thread``: the integer thread key replacing the
    thread id text (the tables' first column), when given."""
    # params[:3] (thread, ns, checkpoint id) key the memo's "base" rows: kept as is
    # (``_bound`` inlined: this runs every step)
    parent, data, meta = enc_id(row[3]), row[5], row[6]
    return (
        row[0] if thread is None else thread,
        row[1],
        enc_id(row[2]),
        bytearray(parent) if type(parent) is bytes else parent,
        row[4],
        bytearray(data) if type(data) is bytes else data,
        bytearray(meta) if type(meta) is bytes else meta,
        row[7],
    )


def _w_row(r: Sequence[Any]) -> o.WriteRow:
    return o.WriteRow(r[0], r[1], dec_id(r[2]), dec_id(r[3]), r[4], r[5], r[6])


def _w_params(row: o.WriteRow, thread: Any = None) -> tuple[Any, ...]:
    """As :func:`_cp_params`, for a task's writes row."""
    # (``_bound`` inlined: this runs every step)
    cid, tid, data, hashes = enc_id(row[2]), enc_id(row[3]), row[5], row[6]
    return (
        row[0] if thread is None else thread,
        row[1],
        bytearray(cid) if type(cid) is bytes else cid,
        bytearray(tid) if type(tid) is bytes else tid,
        row[4],
        bytearray(data) if type(data) is bytes else data,
        bytearray(hashes) if type(hashes) is bytes else hashes,
    )


def _chunks(items: Sequence[Any], size: int = CHUNK) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@cache
def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _in_list(part: Sequence[Any]) -> tuple[str, list[Any]]:
    """``?, ?, ...`` for an ``IN (...)`` list and its parameters. Not padded to a
    few fixed lengths: NULL padding cost more instructions (callgrind: +8% per
    ``list(limit=20)``) than the prepared statements it kept in sqlite3's cache."""
    return _marks(len(part)), list(part)


def _scope(
    thread_id: str | None, ns: str | None, table: bool = False
) -> tuple[list[str], list[Any]]:
    """WHERE parts for a thread/namespace: on a ``v_*`` view by default, on a
    ``tl_*`` table (integer ``thread``) when ``table``."""
    where, params = [], []
    if thread_id is not None:
        where.append(f"thread = {THREAD}" if table else "thread_id = ?")
        params.append(thread_id)
    if ns is not None:
        where.append("checkpoint_ns = ?")
        params.append(ns)
    return where, params

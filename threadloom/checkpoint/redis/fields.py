"""Storage rows as Redis hash fields and values (the executor's wire layout).

A thread's rows live in hashes (:mod:`.keys`): the field names a row
(``ns\\0id``, ``ns\\0channel\\0version``, ``ns\\0id\\0task``) and the value is
the rest of the row packed with msgpack. A checkpoint row's value starts with
its parent id so the Lua scripts can walk ancestors without unpacking it. Both
the plans and the Lua scripts depend on this layout; it is kept in one place
so a reader of either sees every field's form.
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import BlobRow, CheckpointRow, RefRow, WriteRow
from threadloom.errors import CorruptBlobError

__all__ = [
    "SEP",
    "blob_row",
    "checkpoint_row",
    "expected_arg",
    "pack_values",
    "ref_field",
    "ref_row",
    "row_fields",
    "row_gone",
    "row_value",
    "text",
    "unpack_values",
    "write_args",
    "write_row",
]

SEP = "\0"


def pack_values(values: list[Any]) -> bytes:
    return ormsgpack.packb(values)


def unpack_values(data: bytes) -> list[Any]:
    return ormsgpack.unpackb(data)


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _packed(data: bytes, kinds: tuple[type, ...]) -> list[Any] | None:
    """The packed rest of a row when it has the shape the plans write (as many
    values as ``kinds``, each of its kind), else None: a damaged value."""
    try:
        values = unpack_values(data)
    except (TypeError, ValueError):
        return None
    if type(values) is not list or len(values) != len(kinds):
        return None
    for value, kind in zip(values, kinds):
        if not isinstance(value, kind) or type(value) is bool:
            return None
    return values


_ROW_KINDS = (str, bytes, str, (str, type(None)))  # tag, data, metadata, run_id
_REF_KINDS = (int, str, bytes, bytes, int, int)  # kind, tag, data, hashes, length, logical
_BLOB_KINDS = (str, bytes, bytes)  # tag, data, children
_WRITE_KINDS = (str, bytes, bytes)  # task_path, data, hashes


def checkpoint_row(thread_id: str, fld: bytes, value: bytes) -> CheckpointRow:
    """The row stored under ``fld`` (``ns\\0id``) of a thread's row hash.

    A damaged value raises :class:`CorruptBlobError` naming the checkpoint
    (as a damaged row of the SQL backends does when its record is decoded)."""
    ns, cid = text(fld).split(SEP, 1)
    parent, sep, packed = value.partition(b"\0")
    values = _packed(packed, _ROW_KINDS) if sep else None
    try:
        parent_id = parent.decode() or None
    except UnicodeDecodeError:
        values = None
    if values is None:
        raise CorruptBlobError(
            "checkpoint row cannot be decoded (damaged Redis value)",
            thread_id=thread_id,
            checkpoint_id=cid,
        )
    return CheckpointRow(thread_id, ns, cid, parent_id, *values)


def row_gone(thread_id: str, fld: bytes) -> CorruptBlobError:
    """The error of a checkpoint the thread's index names but whose row is
    gone: reading on would serve an older checkpoint, or none, as the latest."""
    _, cid = text(fld).split(SEP, 1)
    return CorruptBlobError(
        "checkpoint row is missing but the thread's index names it (a lost Redis key or field)",
        thread_id=thread_id,
        checkpoint_id=cid,
    )


def ref_row(thread_id: str, fld: bytes, packed: bytes) -> RefRow:
    """The ref stored under ``fld`` (``ns\\0channel\\0version``) of a thread's ref hash.

    A damaged value comes back as a ref of no kind (None fields), which the
    shared reader refuses naming the thread, checkpoint and channel
    (storage/reading.py): the executor does not know which checkpoint asked."""
    ns, channel, version = text(fld).split(SEP, 2)
    values = _packed(packed, _REF_KINDS)
    if values is None:
        return RefRow(thread_id, ns, channel, version, None, None, None, b"", 0, 0)  # type: ignore[arg-type]
    return RefRow(thread_id, ns, channel, version, *values)


def blob_row(h: bytes, packed: bytes) -> BlobRow:
    """The blob stored under ``h`` of a thread's blob hash. A damaged value
    comes back with None fields, which the shared reader refuses naming the
    thread and checkpoint that needed it (storage/reading.py)."""
    values = _packed(packed, _BLOB_KINDS)
    if values is None:
        return BlobRow(h, None, None, b"")  # type: ignore[arg-type]
    return BlobRow(h, *values)


def write_row(thread_id: str, ns: str, cid: str, task_id: str, packed: bytes) -> WriteRow:
    """A task's pending-writes row. A damaged value comes back with ``data``
    None, which the shared decoding refuses naming the task (storage/writes.py)."""
    values = _packed(packed, _WRITE_KINDS)
    if values is None:
        return WriteRow(thread_id, ns, cid, task_id, "", None, b"")  # type: ignore[arg-type]
    return WriteRow(thread_id, ns, cid, task_id, *values)


def row_fields(row: CheckpointRow) -> tuple[str, str]:
    """(row field / ck member, ids member) of a checkpoint."""
    return (
        f"{row.checkpoint_ns}{SEP}{row.checkpoint_id}",
        f"{row.checkpoint_id}{SEP}{row.checkpoint_ns}",
    )


def row_value(row: CheckpointRow) -> bytes:
    """Parent id first (so Lua can walk ancestors), then the packed rest of the row."""
    return (row.parent_checkpoint_id or "").encode() + b"\0" + pack_values(list(row[4:]))


def ref_field(r: RefRow) -> str:
    return f"{r.checkpoint_ns}{SEP}{r.channel}{SEP}{r.version}"


def write_args(w: WriteRow) -> list[Any]:
    """(field of the checkpoint, task id, packed rest) of a pending write."""
    return [
        f"{w.checkpoint_ns}{SEP}{w.checkpoint_id}",
        w.task_id,
        pack_values([w.task_path, w.data, w.hashes]),
    ]


def expected_arg(row: Any) -> bytes | str:
    """The WRITES script's compare-and-set argument for a task's current entry."""
    if row is ops.ANY_ROW:
        return "*"
    return b"=" + write_args(row)[2] if row is not None else ""

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
from threadloom.checkpoint.storage.ops import CheckpointRow, RefRow, WriteRow

__all__ = [
    "SEP",
    "checkpoint_row",
    "expected_arg",
    "pack_values",
    "ref_field",
    "ref_row",
    "row_fields",
    "row_value",
    "text",
    "unpack_values",
    "write_args",
]

SEP = "\0"


def pack_values(values: list[Any]) -> bytes:
    return ormsgpack.packb(values)


def unpack_values(data: bytes) -> list[Any]:
    return ormsgpack.unpackb(data)


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def checkpoint_row(thread_id: str, fld: bytes, value: bytes) -> CheckpointRow:
    """The row stored under ``fld`` (``ns\\0id``) of a thread's row hash."""
    ns, cid = text(fld).split(SEP, 1)
    parent, _, packed = value.partition(b"\0")
    return CheckpointRow(thread_id, ns, cid, parent.decode() or None, *unpack_values(packed))


def ref_row(thread_id: str, fld: bytes, packed: bytes) -> RefRow:
    """The ref stored under ``fld`` (``ns\\0channel\\0version``) of a thread's ref hash."""
    ns, channel, version = text(fld).split(SEP, 2)
    return RefRow(thread_id, ns, channel, version, *unpack_values(packed))


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

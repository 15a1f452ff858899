"""Checkpoint and task ids in ``checkpoint_writes`` as 16 bytes instead of 37.

Ids are uuid strings (36 characters, 37 bytes stored, again in the primary key).
That table only ever compares them for equality (it is never ordered by them),
so a canonical lowercase uuid is stored as its 16 raw bytes and anything else
as its UTF-8 bytes behind a 1-2 byte marker chosen so that the result is never
16 bytes long: the encoding is one-to-one and :func:`unpack_id` gives back the
exact string. ``checkpoints`` keeps text ids: it is ordered by them, and this
encoding does not keep the order between uuid and non-uuid ids.

:func:`sql_pack` is the same encoding in SQL, for the migration that converts
existing rows.
"""

from __future__ import annotations

import re

__all__ = ["pack_id", "sql_pack", "unpack_id"]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def sql_pack(column: str) -> str:
    """SQL packing text ``column`` exactly as :func:`pack_id` does, written for a
    migration template (``{{`` / ``}}`` because MIGRATIONS go through ``str.format``)."""
    uuid = "'^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$'"
    return (
        f"CASE WHEN {column} ~ {uuid} THEN decode(replace({column}, '-', ''), 'hex')"
        f" WHEN octet_length({column}) = 15 THEN '\\x0100'::bytea || convert_to({column}, 'UTF8')"
        f" ELSE '\\x00'::bytea || convert_to({column}, 'UTF8') END"
    )


def pack_id(value: str) -> bytes:
    """16 raw bytes for a canonical uuid; otherwise marker + UTF-8 (never 16 bytes)."""
    if len(value) == 36 and _UUID.fullmatch(value):
        return bytes.fromhex(value.replace("-", ""))
    raw = value.encode()
    return (b"\x01\x00" if len(raw) == 15 else b"\x00") + raw


def unpack_id(packed: bytes | memoryview) -> str:
    """The id string :func:`pack_id` was given."""
    b = bytes(packed)
    if len(b) == 16:
        h = b.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return b[2:].decode() if b[0] == 1 else b[1:].decode()

"""Keys compared only for equality, stored packed: ids of ``checkpoint_writes`` and
channel versions of ``checkpoint_refs``.

**Ids** (``checkpoint_writes``) take 16 bytes instead of 37.

Ids are uuid strings (36 characters, 37 bytes stored, again in the primary key).
That table only ever compares them for equality (it is never ordered by them),
so a canonical lowercase uuid is stored as its 16 raw bytes and anything else
as its UTF-8 bytes behind a 1-2 byte marker chosen so that the result is never
16 bytes long: the encoding is one-to-one and :func:`unpack_id` gives back the
exact string. ``checkpoints`` keeps text ids: it is ordered by them, and this
encoding does not keep the order between uuid and non-uuid ids.

:func:`sql_pack` is the same encoding in SQL, for the migration that converts
existing rows.

**Versions** (``checkpoint_refs``): the storage core's version key looks like
``97.0.9798707268490134`` (counter, then LangGraph's random fraction). As text
it takes 22 bytes and, since ``"100.…" < "99.…"``, each new version lands in
the middle of the primary key, whose pages then split half-empty. Packed it is
a marker byte, the counter as 4 big-endian bytes and the fraction's digits two
per byte (13-14 bytes), and a thread's new versions are appended in order.
Anything of another shape is stored as marker + UTF-8. :func:`sql_pack_version`
is the SQL twin.
"""

from __future__ import annotations

import re
from typing import Any

from threadloom.checkpoint.storage.ops import CheckpointRow, RefRow

__all__ = [
    "pack_id",
    "packed_keys",
    "packed_ref",
    "packed_write",
    "unpacked_ref",
    "pack_version",
    "sql_pack",
    "sql_pack_version",
    "sql_unpack",
    "packed_ckpt",
    "unpacked_ckpt",
    "unpack_id",
    "unpack_version",
]

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


def sql_unpack(column: str) -> str:
    """:func:`unpack_id` in SQL (for queries, not migration templates)."""
    return (
        f"CASE WHEN octet_length({column}) = 16 THEN regexp_replace(encode({column}, 'hex'),"
        " '(.{8})(.{4})(.{4})(.{4})(.{12})', '\\1-\\2-\\3-\\4-\\5')"
        f" WHEN get_byte({column}, 0) = 1 THEN convert_from(substring({column} FROM 3), 'UTF8')"
        f" ELSE convert_from(substring({column} FROM 2), 'UTF8') END"
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


_VKEY = re.compile(r"([1-9][0-9]{0,8})\.0\.([0-9]+)")


def pack_version(value: str) -> bytes:
    """``counter.0.digits`` -> 0x01 + counter (4 bytes) + digits (BCD, ``f``-padded);
    anything else -> 0x00 + UTF-8."""
    m = _VKEY.fullmatch(value)
    if m is None:
        return b"\x00" + value.encode()
    digits = m.group(2)
    bcd = bytes.fromhex(digits + "f" * (len(digits) % 2))
    return b"\x01" + int(m.group(1)).to_bytes(4, "big") + bcd


def unpack_version(packed: bytes | memoryview) -> str:
    """The version string :func:`pack_version` was given."""
    b = bytes(packed)
    if b[0] == 0:
        return b[1:].decode()
    digits = b[5:].hex()
    return f"{int.from_bytes(b[1:5], 'big')}.0.{digits[:-1] if digits[-1] == 'f' else digits}"


def sql_pack_version(column: str) -> str:
    """:func:`pack_version` in SQL, for a migration template (braces doubled)."""
    frac = f"split_part({column}, '.', 3)"
    return (
        f"CASE WHEN {column} ~ '^[1-9][0-9]{{{{0,8}}}}\\.0\\.[0-9]+$' THEN '\\x01'::bytea"
        f" || int4send(split_part({column}, '.', 1)::int4)"
        f" || decode({frac} || repeat('f', mod(length({frac}), 2)), 'hex')"
        f" ELSE '\\x00'::bytea || convert_to({column}, 'UTF8') END"
    )


# rows as the executor stores and reads them (storage rows are NamedTuples)


def packed_write(w: Any) -> tuple[Any, ...]:
    """A WriteRow as stored: checkpoint and task ids packed."""
    return (w[0], w[1], pack_id(w[2]), pack_id(w[3]), *w[4:])


def packed_ref(r: Any) -> tuple[Any, ...]:
    """A RefRow as stored: its version packed."""
    return (r[0], r[1], r[2], pack_version(r[3]), *r[4:])


def unpacked_ref(row: Any) -> RefRow:
    """A stored ref row back as the RefRow the storage core wrote."""
    return RefRow(row[0], row[1], row[2], unpack_version(row[3]), *row[4:])


def packed_keys(keys: Any) -> list[list[Any]]:
    """(channel, version) keys -> [channels, packed versions], for ``unnest``."""
    return [[k[0] for k in keys], [pack_version(k[1]) for k in keys]]


def packed_ckpt(row: Any) -> tuple[Any, ...]:
    """A CheckpointRow as stored: its parent id packed (None stays None)."""
    parent = row[3]
    return (*row[:3], None if parent is None else pack_id(parent), *row[4:])


def unpacked_ckpt(row: Any) -> CheckpointRow:
    """A stored checkpoint row back as the CheckpointRow the storage core wrote."""
    parent = row[3]
    return CheckpointRow(*row[:3], None if parent is None else unpack_id(parent), *row[4:])

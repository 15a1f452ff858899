"""Keys stored packed: ids and task paths of ``checkpoint_writes``, channel
versions of ``checkpoint_refs``, checkpoint ids of ``checkpoints`` (in order).

**Ids** (``checkpoint_writes``) take 16 bytes instead of 37.

Ids are uuid strings (36 characters, 37 bytes stored, again in the primary key).
That table only ever compares them for equality (it is never ordered by them),
so a canonical lowercase uuid is stored as its 16 raw bytes and anything else
as its UTF-8 bytes behind a 1-2 byte marker chosen so that the result is never
16 bytes long: the encoding is one-to-one and :func:`unpack_id` gives back the
exact string. ``checkpoints`` keeps text ids: it is ordered by them, and this
encoding does not keep the order between uuid and non-uuid ids (``checkpoints``
uses the ordered encoding below).

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

**Ordered ids** (``checkpoints.checkpoint_id`` and ``parent_checkpoint_id``) take
17 bytes instead of 37 and keep the order of the strings (code point order, as
Python sorts them), so ``ORDER BY checkpoint_id`` and the list cursors work on
the packed bytes. A canonical lowercase uuid ``U`` is ``0x01 + U's 16 bytes``
(uuid strings sort like their 128-bit numbers). Any other string ``s`` lies
between two adjacent uuids: ``X``, the greatest uuid string below ``s``, and
the next one; it becomes ``0x01 + X + UTF-8(s)``, which sorts after ``X``'s
17 bytes and before the next uuid's. A string below every uuid (below
``00000000-0000-…``) becomes ``0x00 + UTF-8(s)``. :func:`sql_pack_ordered` is
the SQL twin (a function body for the migration).
"""

from __future__ import annotations

import re
from typing import Any

from threadloom.checkpoint.postgres.metapack import pack_meta, unpack_meta
from threadloom.checkpoint.storage.ops import CheckpointRow, RefRow, WriteRow
from threadloom.checkpoint.storage.record import RECORD_TAG

__all__ = [
    "pack_id",
    "pack_ordered",
    "unpack_ordered",
    "packed_keys",
    "packed_ref",
    "packed_write",
    "pack_path",
    "unpack_path",
    "unpacked_write",
    "unpacked_ref",
    "pack_version",
    "sql_pack",
    "sql_pack_version",
    "SQL_PACK_ORDERED",
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


_TEMPLATE = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
_HEX = "0123456789abcdef"


def _below(s: str) -> int:
    """The greatest canonical uuid (as its number) whose string sorts below
    ``s``, or -1 when none does; ``s`` is not itself a canonical uuid."""
    digits = ""
    for i, want in enumerate(_TEMPLATE):
        if i == len(s):  # s is a proper prefix: below every uuid it begins
            return _pad(digits, "0") - 1
        c = s[i]
        if (want == "-" and c != "-") or (want == "x" and c not in _HEX):
            if c < ("-" if want == "-" else "0"):
                return _pad(digits, "0") - 1
            if want == "x" and c < "a":  # between '9' and 'a'
                return _pad(digits + "9", "f")
            return _pad(digits, "f")
        if want == "x":
            digits += c
    return int(digits, 16)  # s is a uuid followed by more characters


def _pad(digits: str, fill: str) -> int:
    return int(digits + fill * (32 - len(digits)), 16)


def pack_ordered(value: str) -> bytes:
    """A checkpoint id packed so that byte order is the strings' order.

    Remembered for the last ids packed: a step packs its checkpoint's id, and
    the next step packs it again as its parent and its diff base."""
    packed = _ordered.get(value)
    if packed is None:
        packed = _pack_ordered(value)
        if len(_ordered) >= 256:
            _ordered.clear()
        _ordered[value] = packed
    return packed


_ordered: dict[str, bytes] = {}


def _pack_ordered(value: str) -> bytes:
    if len(value) == 36 and _UUID.fullmatch(value):
        return b"\x01" + bytes.fromhex(value.replace("-", ""))
    below = _below(value)
    if below < 0:
        return b"\x00" + value.encode()
    return b"\x01" + below.to_bytes(16, "big") + value.encode()


def unpack_ordered(packed: bytes | memoryview) -> str:
    """The id string :func:`pack_ordered` was given (a uuid without copying the
    bytes first: every listed row unpacks two ids)."""
    if len(packed) == 17 and packed[0] == 1:
        h = packed.hex()
        return f"{h[2:10]}-{h[10:14]}-{h[14:18]}-{h[18:22]}-{h[22:]}"
    b = bytes(packed)
    return b[1:].decode() if b[0] == 0 else b[17:].decode()


# pack_ordered in PL/pgSQL, for the migration that packs existing checkpoint ids:
# a migration template (braces doubled); characters compared by code point (ascii)
SQL_PACK_ORDERED = r"""CREATE OR REPLACE FUNCTION pg_temp.tl_pack_ordered(s text) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT AS $tl_pack$
DECLARE
    tpl CONSTANT text := 'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx';
    hex CONSTANT text := '0123456789abcdef';
    digits text := ''; h text; c int; i int := 1; j int;
BEGIN
    IF s ~ '^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$' THEN
        RETURN '\x01'::bytea || decode(replace(s, '-', ''), 'hex');
    END IF;
    LOOP
        IF i > 36 THEN h := digits; EXIT; END IF;
        IF i > length(s) THEN h := rpad(digits, 32, '0'); EXIT; END IF;
        c := ascii(substr(s, i, 1));
        IF substr(tpl, i, 1) = '-' THEN
            IF c <> 45 THEN
                h := CASE WHEN c < 45 THEN rpad(digits, 32, '0') ELSE rpad(digits, 32, 'f') END;
                EXIT;
            END IF;
        ELSIF (c BETWEEN 48 AND 57) OR (c BETWEEN 97 AND 102) THEN
            digits := digits || chr(c);
        ELSE
            h := CASE WHEN c < 48 THEN rpad(digits, 32, '0')
                WHEN c < 97 THEN rpad(digits || '9', 32, 'f') ELSE rpad(digits, 32, 'f') END;
            EXIT;
        END IF;
        i := i + 1;
    END LOOP;
    IF i <= 36 AND (i > length(s) OR ascii(substr(s, i, 1)) < CASE
            WHEN substr(tpl, i, 1) = '-' THEN 45 ELSE 48 END) THEN
        j := 32;  -- the uuid just below every uuid that begins with s[:i]: minus one
        WHILE j >= 1 AND substr(h, j, 1) = '0' LOOP j := j - 1; END LOOP;
        IF j = 0 THEN
            RETURN '\x00'::bytea || convert_to(s, 'UTF8');
        END IF;
        h := substr(h, 1, j - 1) || substr(hex, strpos(hex, substr(h, j, 1)) - 1, 1)
            || repeat('f', 32 - j);
    END IF;
    RETURN '\x01'::bytea || decode(h, 'hex') || convert_to(s, 'UTF8');
END $tl_pack$"""


# rows as the executor stores and reads them (storage rows are NamedTuples)


def packed_write(w: Any) -> tuple[Any, ...]:
    """A WriteRow as stored: checkpoint and task ids and the task path packed."""
    return (w[0], w[1], pack_id(w[2]), pack_id(w[3]), pack_path(w[4]), *w[5:])


def unpacked_write(row: Any) -> WriteRow:
    """A stored write row back as the WriteRow the storage core wrote."""
    return WriteRow(
        row[0], row[1], unpack_id(row[2]), unpack_id(row[3]), unpack_path(row[4]), *row[5:]
    )


# a task path's usual prefixes (pregel/ids.task_path_str), stored as one character;
# a path that itself starts with one of the codes is stored behind ESCAPE
_PATH_PREFIXES = {"\x01": "~__pregel_pull, ", "\x02": "~__pregel_push, "}
_PATH_ESCAPE = "\x03"


def pack_path(path: str) -> str:
    """``~__pregel_pull, agent`` -> ``\\x01agent`` (23 bytes stored -> 7); any other
    path is kept, escaped when it starts with a code character."""
    for code, prefix in _PATH_PREFIXES.items():
        if path.startswith(prefix):
            return code + path[len(prefix) :]
    if path[:1] in ("\x01", "\x02", _PATH_ESCAPE):
        return _PATH_ESCAPE + path
    return path


def unpack_path(stored: str) -> str:
    """The task path :func:`pack_path` was given."""
    head = stored[:1]
    if head == _PATH_ESCAPE:
        return stored[1:]
    prefix = _PATH_PREFIXES.get(head)
    return stored if prefix is None else prefix + stored[1:]


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
    """A CheckpointRow as stored: its id and parent id packed in order (None stays
    None), its tag NULL when it is the usual :data:`RECORD_TAG`, its metadata
    packed (:mod:`.metapack`)."""
    parent = row[3]
    return (
        row[0],
        row[1],
        pack_ordered(row[2]),
        None if parent is None else pack_ordered(parent),
        None if row[4] == RECORD_TAG else row[4],
        row[5],
        pack_meta(row[6]),
        row[7],
    )


def unpacked_ckpt(row: Any) -> CheckpointRow:
    """A stored checkpoint row back as the CheckpointRow the storage core wrote."""
    parent = row[3]
    return CheckpointRow(
        row[0],
        row[1],
        unpack_ordered(row[2]),
        None if parent is None else unpack_ordered(parent),
        RECORD_TAG if row[4] is None else row[4],
        row[5],
        unpack_meta(row[6]),
        row[7],
    )

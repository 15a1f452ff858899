"""Checkpoint metadata stored packed (``checkpoints.metadata``, migration 21).

Nearly every checkpoint's metadata is ``{"source":"loop","step":N,"parents":{}}``:
43 bytes a row, most of it the same keys. The saver writes compact JSON text
(``storage.rows.dump_metadata``), in which no character below U+0020 ever
appears (JSON escapes them inside strings, and compact text has no whitespace
outside them). Such a character therefore stands for one of the usual
fragments below, and the row above is stored as ``\\x01N\\x05`` (5 bytes).

Packing replaces the fragments in :data:`FRAGMENTS` order; unpacking maps each
code back (:meth:`str.translate`, one pass). Any text without a code character
round-trips exactly, however it was packed (the fragments hold no code), so
rows written before the migration (``jsonb``'s text form, with spaces) read
back unchanged. Tab, newline and carriage return are never codes (JSON
whitespace); NUL is not (a ``text`` column cannot hold it).

:func:`sql_unpack` is the unpacking in SQL, for metadata filters
(``metadata::jsonb @> ...`` on the unpacked text); :func:`sql_pack` the packing,
for the migration that converts existing rows.
"""

from __future__ import annotations

__all__ = ["FRAGMENTS", "pack_meta", "sql_pack", "sql_unpack", "unpack_meta"]

FRAGMENTS: tuple[tuple[str, str], ...] = (
    ("\x01", '{"source":"loop","step":'),
    ("\x02", '{"source":"input","step":'),
    ("\x03", '{"source":"update","step":'),
    ("\x04", '{"source":"fork","step":'),
    ("\x05", ',"parents":{}}'),
    ("\x06", ',"parents":{'),
    ("\x07", '"source":'),
    ("\x08", '"step":'),
    ("\x0b", '"parents":'),
    ("\x0c", '"run_id":'),
    ("\x0e", '"thread_id":'),
    ("\x0f", '"checkpoint_ns":'),
)
"""(code, fragment), longest first where one fragment contains another."""

_UNPACK = {ord(code): fragment for code, fragment in FRAGMENTS}


def pack_meta(text: str) -> str:
    """Metadata JSON text as stored (see the module docstring)."""
    for code, fragment in FRAGMENTS:
        if fragment in text:
            text = text.replace(fragment, code)
    return text


def unpack_meta(stored: str) -> str:
    """The metadata text :func:`pack_meta` was given."""
    return stored.translate(_UNPACK)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_unpack(column: str) -> str:
    """:func:`unpack_meta` as an SQL expression over a ``text`` column."""
    expr = column
    for code, fragment in FRAGMENTS:
        expr = f"replace({expr}, chr({ord(code)}), {_literal(fragment)})"
    return expr


def sql_pack(column: str) -> str:
    """:func:`pack_meta` as an SQL expression over a ``text`` column."""
    expr = column
    for code, fragment in FRAGMENTS:
        expr = f"replace({expr}, {_literal(fragment)}, chr({ord(code)}))"
    return expr

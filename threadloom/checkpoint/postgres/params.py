"""Statement parameters in the forms psycopg dumps cheaply.

psycopg dumps a Python list element by element in Python, escaping each
element through a regular expression; for a put's ~20 array parameters that
cost more than the rest of the call. A list whose placeholder is cast to an
array type (``%s::bytea[]``) is sent instead already encoded in Postgres's
binary array format (:func:`wire_params`, with the array type's OID): no hex
text twice the size of the bytes to build, send and parse. An element type
that format is not written for here goes as one array literal string
(:func:`cheap_params`), which the server reads through the same cast. The
value stored is the same either way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.postgres.binarray import ENCODERS, use_binary_arrays

if TYPE_CHECKING:
    from threadloom.checkpoint.postgres.stmt import Stmt

__all__ = ["array_literal", "array_slots", "cheap_params", "use_binary_arrays", "wire_params"]

# a placeholder followed by a cast to an array type: its list can travel as a literal
_ARRAY_CAST = re.compile(r"\s*::\s*([A-Za-z_][\w ]*?)\s*\[\]")
_array_slots: dict[str, tuple[tuple[int, str], ...]] = {}


def typed_slots(sql: str) -> tuple[tuple[int, str], ...]:
    """(index, element type) of the ``%s`` placeholders of ``sql`` cast to an
    array type (cached per text)."""
    slots = _array_slots.get(sql)
    if slots is None:
        found = []
        if "%%" not in sql:
            for i, tail in enumerate(sql.split("%s")[1:]):
                match = _ARRAY_CAST.match(tail)
                if match:
                    found.append((i, match.group(1).strip().lower()))
        if len(_array_slots) >= 1024:  # generated texts (list filters) stay bounded
            _array_slots.clear()
        slots = _array_slots[sql] = tuple(found)
    return slots


def array_slots(sql: str) -> tuple[int, ...]:
    """Indexes of the ``%s`` placeholders of ``sql`` cast to an array type (cached)."""
    return tuple(i for i, _ in typed_slots(sql))


def array_literal(values: list[Any]) -> str | None:
    """``values`` as a Postgres array literal, or None for an element type not
    handled here (the list then goes through psycopg's own dumper).

    One join over ``bytes.hex``/``str.replace`` is exact for the element types
    the savers send (bytes, str, int, None).
    """
    out = []
    for value in values:
        kind = type(value)
        if kind is bytes:
            out.append('"\\\\x' + value.hex() + '"')
        elif kind is str:
            out.append('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')
        elif value is None:
            out.append("NULL")
        elif kind is int:
            out.append(str(value))
        else:
            return None
    return "{" + ",".join(out) + "}"


def cheap_params(stmt: Stmt) -> Any:
    """``stmt.params`` with each list cast to an array type as one literal string.

    The server reads the literal through the cast exactly as it read the list
    psycopg would have sent (psycopg sends lists as text literals too).
    """
    return _convert(stmt, False)


def wire_params(stmt: Stmt) -> Any:
    """``stmt.params`` with each list cast to an array type pre-encoded in the
    binary array format (an element type not handled there: as a literal,
    see :func:`cheap_params`). Only for a connection whose adapters passed
    :func:`use_binary_arrays`."""
    return _convert(stmt, True)


def _convert(stmt: Stmt, binary: bool) -> Any:
    params = stmt.params
    if stmt.fetch == "many" or not params or type(params) not in (tuple, list):
        return params
    out = None
    for i, kind in typed_slots(stmt.sql):
        if i < len(params) and type(params[i]) is list:
            value: Any = None
            if binary:
                encode = ENCODERS.get(kind)
                value = encode(params[i]) if encode is not None else None
            if value is None:
                value = array_literal(params[i])
            if value is not None:
                if out is None:
                    out = list(params)
                out[i] = value
    return params if out is None else out

"""Statement parameters in the forms psycopg dumps cheaply.

psycopg dumps a Python list element by element in Python, escaping each
element through a regular expression; for a put's ~20 array parameters that
cost more than the rest of the call. A list whose placeholder is cast to an
array type (``%s::bytea[]``) is sent instead as one array literal string,
which the server reads through the same cast: the value stored is the same,
and psycopg sent lists as text literals anyway.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadloom.checkpoint.postgres.connection import Stmt

__all__ = ["array_literal", "array_slots", "cheap_params"]

# a placeholder followed by a cast to an array type: its list can travel as a literal
_ARRAY_CAST = re.compile(r"\s*::\s*[A-Za-z_][\w ]*\[\]")
_array_slots: dict[str, tuple[int, ...]] = {}


def array_slots(sql: str) -> tuple[int, ...]:
    """Indexes of the ``%s`` placeholders of ``sql`` cast to an array type (cached)."""
    slots = _array_slots.get(sql)
    if slots is None:
        parts = sql.split("%s")
        slots = (
            ()
            if "%%" in sql
            else tuple(i for i, tail in enumerate(parts[1:]) if _ARRAY_CAST.match(tail))
        )
        if len(_array_slots) >= 1024:  # generated texts (list filters) stay bounded
            _array_slots.clear()
        _array_slots[sql] = slots
    return slots


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
    params = stmt.params
    if stmt.fetch == "many" or not params or type(params) not in (tuple, list):
        return params
    out = None
    for i in array_slots(stmt.sql):
        if i < len(params) and type(params[i]) is list:
            text = array_literal(params[i])
            if text is not None:
                if out is None:
                    out = list(params)
                out[i] = text
    return params if out is None else out

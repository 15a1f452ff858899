"""A LangGraph ``SqliteSaver`` file opened by threadloom.

threadloom keeps its own ``tl_*`` tables, so the threads LangGraph stored in
the same file look empty here: a ported program would silently start its
conversations over. ``setup`` warns once, naming the way to copy them over.
"""

from __future__ import annotations

import sqlite3
import warnings
from typing import Any

__all__ = ["LangGraphDataWarning", "has_langgraph_tables", "warn_if_langgraph_data"]


class LangGraphDataWarning(UserWarning):
    """The database holds LangGraph checkpoints that threadloom does not read in place."""


def has_langgraph_tables(conn: Any) -> bool:
    """Whether ``conn``'s database has LangGraph ``SqliteSaver``'s tables: the
    names and the ``checkpoints`` columns (an application's own table of that
    name does not count). ``import-langgraph`` and the warning below share it."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"checkpoints", "writes"} <= tables:
            return False
        conn.execute(f"{_PROBE} FROM checkpoints LIMIT 0").fetchall()
    except sqlite3.DatabaseError:
        return False
    return True


_PROBE = "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata"


def warn_if_langgraph_data(conn: Any, where: str) -> bool:
    """Warn (and return True) when ``conn``'s database has LangGraph checkpoints
    and no threadloom checkpoints yet."""
    if not has_langgraph_tables(conn):
        return False
    try:
        if conn.execute(f"{_PROBE} FROM checkpoints LIMIT 1").fetchone() is None:
            return False
        if conn.execute("SELECT 1 FROM tl_checkpoints LIMIT 1").fetchone() is not None:
            return False
    except sqlite3.DatabaseError:  # no tl_checkpoints (yet): nothing to compare
        return False
    warnings.warn(
        f"{where} holds LangGraph checkpoints, which threadloom does not read in place "
        "(its threads look empty here). Copy them once: `threadloom import-langgraph "
        "FILE FILE`, or threadloom.checkpoint.migrate.import_langgraph(...)",
        LangGraphDataWarning,
        stacklevel=4,
    )
    return True

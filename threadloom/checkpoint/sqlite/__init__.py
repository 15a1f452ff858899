"""SQLite savers: ``SqliteSaver`` (sqlite3) and, in ``.aio``, ``AsyncSqliteSaver``."""

from threadloom.checkpoint.sqlite.saver import SqliteSaver

__all__ = ["SqliteSaver"]

"""PostgreSQL savers (psycopg 3): ``PostgresSaver`` and ``AsyncPostgresSaver``.

See docs/postgres.md.
"""

from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.checkpoint.postgres.queries import MIGRATIONS
from threadloom.checkpoint.postgres.saver import PostgresSaver

__all__ = ["AsyncPostgresSaver", "MIGRATIONS", "PostgresSaver"]

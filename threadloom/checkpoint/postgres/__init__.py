"""PostgreSQL savers (psycopg 3): ``PostgresSaver`` and ``AsyncPostgresSaver``.

See docs/postgres.md.
"""

from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.checkpoint.postgres.saver import PostgresSaver
from threadloom.checkpoint.postgres.schema import MIGRATIONS

__all__ = ["AsyncPostgresSaver", "MIGRATIONS", "PostgresSaver"]

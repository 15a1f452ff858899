"""An optimistic transaction whose connection dies is replayed from its log; a
refusal met *during* the replay must still be an OptimisticConflict (the driver
then reruns the flow pessimistically), not a plain StorageError (review3, session 7)."""

import psycopg
import pytest

from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver
from threadloom.checkpoint.postgres.optimistic import REFUSE
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage.drive import OptimisticConflict

pytestmark = pytest.mark.postgres


async def test_refusal_during_replay(pg_url, fresh_schema):
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        c = saver.connector
        t = f'"{fresh_schema}".r'
        async with c.atransaction(write=True):
            await c.aexecute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{fresh_schema}"')])
            await c.aexecute([Stmt(f"CREATE TABLE {t} (v int)")])
        guard = Stmt(f"SELECT CASE WHEN (SELECT count(*) FROM {t}) = 0 THEN 1 ELSE {REFUSE} END")
        # without a replay the refusal is an OptimisticConflict:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
            await admin.execute(f"INSERT INTO {t} VALUES (1)")
            with pytest.raises(OptimisticConflict):
                async with c.atransaction(write=True, optimistic=True):
                    await c.aexecute([guard])
                    await c.aexecute([Stmt("SELECT 1", (), "one")])
            await admin.execute(f"DELETE FROM {t}")
            # the same refusal, met while replaying after a lost connection:
            with pytest.raises(OptimisticConflict):
                async with c.atransaction(write=True, optimistic=True):
                    await c.aexecute([guard])
                    await c.aexecute([Stmt("SELECT 1", (), "one")])  # guard passes
                    pid = c.current.get().conn.info.backend_pid
                    await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                    await admin.execute(f"INSERT INTO {t} VALUES (1)")  # guess now wrong
                    await c.aexecute([Stmt("SELECT 2", (), "one")])  # lost -> replay

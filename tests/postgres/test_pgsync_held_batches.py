"""Sync PgConnector with held-back batches: a client-side error in a held batch
fails the transaction only; a connection killed while only held batches are
pending is replayed at the commit; an optimistic refusal met while replaying is
an OptimisticConflict (the sync mirrors of test_apg_held_batches and
test_apg_replay_refusal)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from threadloom.checkpoint.postgres.optimistic import REFUSE
from threadloom.checkpoint.postgres.saver import PostgresSaver
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage.drive import OptimisticConflict
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres
CONNS = [False, {"max_size": 1, "timeout": 3.0}]


def _table(connector: Any, schema: str, name: str) -> str:
    t = f'"{schema}".{name}'
    with connector.transaction(write=True):
        connector.execute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')])
        connector.execute([Stmt(f"CREATE TABLE {t} (v text)")])
    return t


def _rows(connector: Any, t: str) -> list[str]:
    with connector.transaction(write=False):
        [got] = connector.execute([Stmt(f"SELECT v FROM {t} ORDER BY v", (), "all")])
    return [r[0] for r in got]


@pytest.mark.parametrize("pool", CONNS, ids=["single", "pool"])
def test_client_side_error_in_a_held_batch(pg_url: str, fresh_schema: str, pool: Any) -> None:
    """A NUL byte (psycopg refuses it while dumping) in a held-back batch."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, pool=pool) as saver:
        c = saver.connector
        t = _table(c, fresh_schema, "nul")
        with pytest.raises(StorageError):
            with c.transaction(write=True):
                c.execute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("ok",))])
                c.execute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("a\x00b",))])
                c.execute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("after",))])
        assert _rows(c, t) == []
        with c.transaction(write=True):
            c.execute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("z",))])
        assert _rows(c, t) == ["z"]


@pytest.mark.parametrize("pool", CONNS, ids=["single", "pool"])
def test_kill_with_only_held_batches_then_commit(pg_url: str, fresh_schema: str, pool: Any) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema, pool=pool) as saver:
        c = saver.connector
        t = _table(c, fresh_schema, "killq")
        with c.transaction(write=True):
            c.execute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("1",))])
            c.execute([Stmt(f"INSERT INTO {t} VALUES (%s)", ("2",))])
            pid = c.current.get().conn.info.backend_pid
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            time.sleep(0.2)
        assert _rows(c, t) == ["1", "2"]


def test_a_refusal_met_while_replaying_is_an_optimistic_conflict(
    pg_url: str, fresh_schema: str
) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        c = saver.connector
        t = _table(c, fresh_schema, "r")
        guard = Stmt(f"SELECT CASE WHEN (SELECT count(*) FROM {t}) = 0 THEN 1 ELSE {REFUSE} END")
        with psycopg.connect(pg_url, autocommit=True) as admin:
            with pytest.raises(OptimisticConflict):
                with c.transaction(write=True, optimistic=True):
                    c.execute([guard])
                    c.execute([Stmt("SELECT 1", (), "one")])  # guard passes
                    pid = c.current.get().conn.info.backend_pid
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                    admin.execute(f"INSERT INTO {t} VALUES ('1')")  # the guess is wrong now
                    c.execute([Stmt("SELECT 2", (), "one")])  # lost -> replay -> refused

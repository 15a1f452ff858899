"""PgConnector (sync) holds back pipelined batches nobody reads and sends a batch in one write."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg._pipeline_base import BasePipeline

from threadloom.checkpoint.postgres.saver import PostgresSaver
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres

SET = "SELECT set_config(%s, %s, true)"


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count exchanges with the server (one flush-and-read of the pipeline each)."""
    exchanges: list[int] = []
    communicate = BasePipeline._communicate_gen

    def counting(self: Any) -> Any:
        exchanges.append(1)
        return (yield from communicate(self))

    monkeypatch.setattr(BasePipeline, "_communicate_gen", counting)
    return exchanges


def test_a_batch_leaves_in_one_exchange_with_the_server(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg's ``execute`` flushes each statement alone; held back plus current
    statements are handed to libpq whole and flushed once."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        connector = saver.connector
        batch = [Stmt(SET, ("threadloom.a", str(k))) for k in range(4)]
        with connector.transaction(write=True):
            exchanges = counted(monkeypatch)
            assert connector.execute(batch) == [None] * 4
            assert exchanges == []  # held back, nothing sent yet
            reads = [
                Stmt("SELECT current_setting('threadloom.a')", (), "one"),
                Stmt("SELECT current_setting('threadloom.a') || '!'", (), "all"),
            ]
            assert connector.execute(reads) == [("3",), [("3!",)]]  # sent first, in order
            assert connector.current.get().conn._pipeline is not None  # entered for them
            monkeypatch.undo()
        assert len(exchanges) == 1  # six statements (one per statement: 6)


def test_what_is_still_held_back_is_sent_before_the_commit(pg_url: str, fresh_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        connector = saver.connector
        table = f'"{fresh_schema}".held'
        with connector.transaction(write=True):
            connector.execute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{fresh_schema}"')])
            connector.execute([Stmt(f"CREATE TABLE {table} (v int)")])
            connector.execute([Stmt(f"INSERT INTO {table} VALUES (%s)", (5,))])
            assert connector.queued  # nothing was sent before the commit
        assert connector.queued == {}
        with connector.transaction(write=False):
            got = connector.execute([Stmt(f"SELECT v FROM {table}", (), "all")])
        assert got == [[(5,)]]


def test_a_held_back_insert_is_replayed_on_a_new_connection(pg_url: str, fresh_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        connector = saver.connector
        table = f'"{fresh_schema}".replayed'
        with connector.transaction(write=True):
            connector.execute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{fresh_schema}"')])
            connector.execute([Stmt(f"CREATE TABLE {table} (v int)")])
        with connector.transaction(write=True):
            connector.execute([Stmt(f"INSERT INTO {table} VALUES (%s)", (1,))])
            pid = connector.current.get().conn.info.backend_pid
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            count = Stmt(f"SELECT count(*) FROM {table}", (), "one")
            assert connector.execute([count]) == [(1,)]  # the insert was replayed
            assert connector.current.get().conn.info.backend_pid != pid
        with connector.transaction(write=False):
            got = connector.execute([Stmt(f"SELECT v FROM {table}", (), "all")])
        assert got == [[(1,)]]


def test_an_error_in_a_held_back_statement_fails_the_transaction(
    pg_url: str, fresh_schema: str
) -> None:
    """The failing statement is held back (nobody reads it): its error surfaces
    when it is sent before the commit, the transaction fails and nothing of it
    is stored; the connector is usable afterwards."""
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        connector = saver.connector
        table = f'"{fresh_schema}".failed'
        with connector.transaction(write=True):
            connector.execute([Stmt(f'CREATE SCHEMA IF NOT EXISTS "{fresh_schema}"')])
            connector.execute([Stmt(f"CREATE TABLE {table} (v int)")])
        with pytest.raises(StorageError, match="division by zero"):
            with connector.transaction(write=True):
                connector.execute([Stmt(f"INSERT INTO {table} VALUES (%s)", (1,))])
                assert connector.execute([Stmt("SELECT 1/0")]) == [None]  # held back
        assert connector.queued == {}
        with connector.transaction(write=True):
            got = connector.execute([Stmt(f"SELECT count(*) FROM {table}", (), "one")])
        assert got == [(0,)]


def test_an_error_in_a_batch_that_is_read_fails_the_transaction_only(
    pg_url: str, pg_schema: str
) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        connector = saver.connector
        with pytest.raises(StorageError, match="division by zero"):
            with connector.transaction(write=True):
                connector.execute([Stmt(SET, ("threadloom.a", "1"))])
                connector.execute([Stmt("SELECT 1/0", (), "one")])
        with connector.transaction(write=True):
            again = connector.execute([Stmt("SELECT 40 + 2", (), "one")])
        assert again == [(42,)]

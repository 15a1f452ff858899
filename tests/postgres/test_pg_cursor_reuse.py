"""One cursor per pipelined transaction (connection.shared_cursor)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.postgres.steps import count_parent, count_steps
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres import connection as pgconn

pytestmark = pytest.mark.postgres


def test_a_step_sends_its_batches_through_one_cursor(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that needs no answer before its commit sends its statements and
    the Sync through libpq without any cursor (:mod:`.lean`); one that reads
    first (the pessimistic plan) uses one cursor for its writes."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = count_parent(saver, "cursors")
        batches: list[int] = []
        cursors: list[Any] = []
        send, lean_send = pgconn.PgConnector._send, pgconn.PgConnector._send_lean
        make = psycopg.Connection.cursor

        def counting_send(conn: Any, batch: Any) -> Any:
            batches.append(len(batch))
            return send(conn, batch)

        def counting_lean(conn: Any, batch: Any, out: Any) -> Any:
            batches.append(len(batch))
            return lean_send(conn, batch, out)

        def counting_cursor(self: Any, *args: Any, **kwargs: Any) -> Any:
            cursors.append(make(self, *args, **kwargs))
            return cursors[-1]

        monkeypatch.setattr(pgconn.PgConnector, "_send", staticmethod(counting_send))
        monkeypatch.setattr(pgconn.PgConnector, "_send_lean", staticmethod(counting_lean))
        monkeypatch.setattr(psycopg.Connection, "cursor", counting_cursor)
        parent = count_steps(saver, parent)
        assert sum(batches) >= 6  # statements (one send a step)
        assert len(batches) == 3 and cursors == []  # one write a step, no cursor
        batches.clear()
        saver.executor.optimistic_transaction = None  # pessimistic: reads first
        parent = count_steps(saver, parent, 2)
        monkeypatch.undo()
        assert len(batches) >= 4 and cursors  # psycopg's pipeline, for the reads
        assert saver.get_tuple(parent).checkpoint["channel_values"] == {"count": 1}

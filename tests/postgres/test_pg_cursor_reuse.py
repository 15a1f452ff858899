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
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = count_parent(saver, "cursors")
        batches: list[int] = []
        cursors: list[Any] = []
        send, make = pgconn.PgConnector._send, psycopg.Connection.cursor

        def counting_send(conn: Any, batch: Any) -> Any:
            batches.append(len(batch))
            return send(conn, batch)

        def counting_cursor(self: Any, *args: Any, **kwargs: Any) -> Any:
            cursors.append(make(self, *args, **kwargs))
            return cursors[-1]

        monkeypatch.setattr(pgconn.PgConnector, "_send", staticmethod(counting_send))
        monkeypatch.setattr(psycopg.Connection, "cursor", counting_cursor)
        parent = count_steps(saver, parent)
        monkeypatch.undo()
        assert (
            sum(batches) >= 6
        )  # statements (a held-back batch leaves with the next: one _send a step)
        assert len(cursors) == 3  # one per step's transaction
        assert saver.get_tuple(parent).checkpoint["channel_values"] == {"count": 2}

"""How the connector delimits transactions and sends parameters.

On an autocommit connection a writing flow runs in the pipeline's implicit
transaction (no BEGIN/COMMIT statements; the closing Sync commits), so a flow
that fails after some of its statements went out must still keep nothing.
List parameters cast to an array type travel as literals built by the
connector: every awkward value must come back from the server unchanged.
"""

from __future__ import annotations

import psycopg
import pytest

from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver
from threadloom.checkpoint.postgres.params import array_literal, cheap_params
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.storage import drive, ops
from threadloom.checkpoint.storage.ops import CheckpointRow

pytestmark = pytest.mark.postgres


def _row(thread: str) -> CheckpointRow:
    return CheckpointRow(thread, "", "c1", None, "tl1", b"data", "{}", None)


def _failing_flow(thread: str):
    """Writes a checkpoint row (sent, not committed), then fails."""
    yield ops.InsertRows(checkpoints=(_row(thread),))
    yield ops.GetCheckpoint(thread, "", "c1")  # forces a round trip: the insert ran
    raise RuntimeError("flow failed after writing")


def _count(pg_url: str, schema: str, thread: str) -> int:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        query = f'SELECT count(*) FROM "{schema}".checkpoints WHERE thread_id = %s'
        return conn.execute(query, (thread,)).fetchone()[0]


def test_failed_flow_keeps_nothing(pg_url: str, pg_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        with pytest.raises(RuntimeError, match="after writing"):
            drive.run(_failing_flow("tx-fail"), saver.executor, write=True)
        assert _count(pg_url, pg_schema, "tx-fail") == 0
        drive.run(iter_once(ops.InsertRows(checkpoints=(_row("tx-ok"),))), saver.executor, True)
        assert _count(pg_url, pg_schema, "tx-ok") == 1  # the connection is still usable


async def test_failed_flow_keeps_nothing_async(pg_url: str, pg_schema: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        await saver.setup()
        with pytest.raises(RuntimeError, match="after writing"):
            await drive.arun(_failing_flow("atx-fail"), saver.executor, write=True)
        assert _count(pg_url, pg_schema, "atx-fail") == 0
        flow = iter_once(ops.InsertRows(checkpoints=(_row("atx-ok"),)))
        await drive.arun(flow, saver.executor, True)
        assert _count(pg_url, pg_schema, "atx-ok") == 1


def iter_once(op: ops.Op):
    yield op


AWKWARD_TEXT = ["", "plain", 'quo"te', "back\\slash", "{brace}", "a,b", " pad ", "NULL", "é✓", None]
AWKWARD_BYTES = [b"", b'\x00\xff\\"{},', bytes(range(256)), None]


@pytest.mark.parametrize(
    ("values", "cast"),
    [(AWKWARD_TEXT, "text[]"), (AWKWARD_BYTES, "bytea[]"), ([0, -1, 2**40, None], "bigint[]")],
)
def test_array_literals_read_back_unchanged(pg_url: str, values: list, cast: str) -> None:
    stmt = Stmt(f"SELECT %s::{cast}", (values,), "one")
    params = cheap_params(stmt)
    assert isinstance(params[0], str)  # sent as a literal, not through psycopg's list dumper
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute(stmt.sql, params).fetchone()[0] == values


def test_lists_without_an_array_cast_are_left_to_psycopg() -> None:
    stmt = Stmt("SELECT x FROM t WHERE x = ANY(%s) AND y = ANY(%s::text[])", ([1], ["a"]))
    assert cheap_params(stmt) == [[1], '{"a"}']
    assert array_literal([1.5]) is None  # an element type it does not handle
    assert cheap_params(Stmt("SELECT %s::float8[]", ([1.5],))) == ([1.5],)

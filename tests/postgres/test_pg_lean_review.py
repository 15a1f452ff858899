"""Review findings on the lean commit path (session 9, review1), as tests.

- An error the server raises AT the commit (a deferred constraint, a
  SERIALIZABLE transaction failing with 40001) arrives in the Sync's slot,
  followed by ReadyForQuery: the transaction surely rolled back. It was
  reported as "may or may not be stored" and the connection was closed, the
  caller's own connection included.
- A statement psycopg's cache marked "prepare now" behind a statement that
  failed never got prepared (the server skipped its Parse), but its name stayed
  cached: every later run of it failed with 26000.
"""

from __future__ import annotations

import psycopg
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver, lean
from threadloom.checkpoint.postgres.stmt import Stmt


def _fail_first_commit(url: str, schema: str) -> None:
    """A deferred constraint trigger on the writes table: the first COMMIT
    after it fails with 40001, as a SERIALIZABLE transaction would."""
    with psycopg.connect(url, autocommit=True) as admin:
        table = next(
            r[0]
            for r in admin.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            )
            if "write" in r[0]
        )
        admin.execute(f'CREATE SEQUENCE "{schema}".once')
        admin.execute(
            f"""CREATE FUNCTION "{schema}".fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF nextval('"{schema}".once') = 1 THEN
              RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END IF;
            RETURN NULL; END $$"""
        )
        admin.execute(
            f"""CREATE CONSTRAINT TRIGGER fail_once AFTER INSERT ON "{schema}".{table}
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "{schema}".fail_once()"""
        )


def test_a_commit_failing_at_the_sync_rolled_back_and_keeps_the_connection(
    pg_url: str, fresh_schema: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        saver = PostgresSaver(conn, schema=fresh_schema)
        saver.setup()
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        at = saver.put(config, empty_checkpoint(), {"step": -1}, {})
        _fail_first_commit(pg_url, fresh_schema)
        try:
            saver.put_writes(at, [("n", 1)], "task")
        except Exception as exc:  # a clear refusal is fine; "unknown outcome" is not
            assert "may or may not" not in str(exc), exc
        assert not conn.closed
        writes = saver.get_tuple(at).pending_writes
        assert writes in ([], [("task", "n", 1)])
        saver.put_writes(at, [("n", 1)], "task")  # the connection still works
        assert saver.get_tuple(at).pending_writes == [("task", "n", 1)]


def test_a_prepare_skipped_by_an_aborted_batch_is_not_remembered(pg_url: str) -> None:
    fail = Stmt("SELECT 'threadloom:optimistic-retry'::int WHERE %s", (True,))
    stmt = Stmt("SELECT %s::int", (1,))
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=1) as conn:

        def run(batch: list[Stmt]) -> None:
            conn.wait(lean.exchange_gen(conn, lean.encode(conn, batch), lean.Outcome()))

        run([stmt])
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            run([fail, stmt])
        run([stmt])  # was: prepared statement "_pg3_0" does not exist

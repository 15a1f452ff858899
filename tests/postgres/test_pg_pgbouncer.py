"""Behind PgBouncer in transaction mode (opt-in: THREADLOOM_TEST_PGBOUNCER=<url>).

Transaction pooling hands every transaction to any server connection, so a
prepared statement made in one transaction is missing (or already exists) in
the next. With the default ``prepare_threshold=None`` concurrent writers work;
``prepare_threshold=0`` (what LangGraph hard-codes) typically fails with
"prepared statement ... already exists" (observed with PgBouncer 1.18). CI has no PgBouncer; run it with e.g.
``pool_mode = transaction``, ``default_pool_size = 2``.
"""

from __future__ import annotations

import os
import threading

import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres

URL = os.environ.get("THREADLOOM_TEST_PGBOUNCER")


def busy_threads(saver: PostgresSaver, name: str, threads: int = 4) -> list[str]:
    errors: list[str] = []

    def work(thread_id: str) -> None:
        try:
            parent = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            for i in range(8):
                cp = empty_checkpoint()
                versions = {"messages": str(i + 1)}
                cp["channel_values"] = {"messages": list(range(i + 1))}
                cp["channel_versions"] = versions
                parent = saver.put(parent, cp, {"step": i}, versions)
                saver.put_writes(parent, [("messages", [i])], "task")
                assert saver.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
            saver.delete_thread(thread_id)
        except Exception as exc:  # collected and asserted by the caller
            errors.append(repr(exc))

    workers = [threading.Thread(target=work, args=(f"{name}-{k}",)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return errors


@pytest.mark.skipif(not URL, reason="THREADLOOM_TEST_PGBOUNCER not set (opt-in)")
def test_transaction_pooler_needs_no_prepared_statements(pg_url: str, pg_schema: str) -> None:
    with PostgresSaver.from_conn_string(URL, schema=pg_schema, pool={"max_size": 4}) as saver:
        saver.setup()
        assert busy_threads(saver, "pgb") == []
    pool = {"max_size": 4}
    with PostgresSaver.from_conn_string(URL, schema=pg_schema, pool=pool, prepare_threshold=0) as s:
        errors = busy_threads(s, "pgb-prepared")
        # usually fails (two clients' statements meet on one server connection);
        # whatever fails must be the prepared-statement clash, as a StorageError
        assert all("prepared statement" in e and StorageError.__name__ in e for e in errors)

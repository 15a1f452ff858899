"""Known bug (found in review, session 3; present since reads went autocommit):
a Postgres read on an autocommit connection runs each statement in its own
snapshot, so a ``delete_thread`` committed by another process between a read's
row lookup and its blob lookup makes ``list()`` / ``get_tuple()`` raise
``CorruptBlobError`` ("blob ... is missing") instead of returning the tuple or
nothing. SQLite is not affected (its read transaction is one snapshot).

Kept as a strict xfail so the fix (re-run the read flow once with caches dropped
when a blob or diff base is missing, or one REPEATABLE READ READ ONLY
transaction per multi-statement read) turns it into a passing test."""

from __future__ import annotations

import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.storage import ops


@pytest.mark.xfail(strict=True, reason="known: torn autocommit reads (see module docstring)")
def test_a_delete_between_two_statements_of_a_read_is_not_a_corrupt_blob(pg_url, fresh_schema):
    with (
        PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as a,
        PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as b,
    ):
        a.setup()
        c = empty_checkpoint()
        c["id"] = "1ef00000-0000-6000-8000-000000000001"
        c["channel_values"] = {"doc": "v" * 700}
        c["channel_versions"] = {"doc": "1"}
        cfg = a.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, c, {}, {"doc": "1"})
        a.put_writes(cfg, [("doc", "w" * 700)], "task-1")
        real = a.executor.execute
        fired: list[int] = []

        def execute(op, *args, **kw):
            out = real(op, *args, **kw)
            if type(op) is ops.LoadWrites and not fired:
                fired.append(1)
                b.delete_thread("t")  # another process commits mid-read
            return out

        a.executor.execute = execute
        listed = [t.checkpoint["id"] for t in a.list({"configurable": {"thread_id": "t"}})]
        assert fired and listed in ([], [c["id"]])

"""A put that sends blobs takes its thread's advisory lock in the blob insert
(one statement less than a separate ``SELECT pg_advisory_xact_lock``)."""

from __future__ import annotations

import os
import threading

import psycopg
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver
from threadloom.checkpoint.postgres.executor import thread_lock_key

pytestmark = pytest.mark.postgres

BIG = os.urandom(10_000).hex()


def _put_big(saver: PostgresSaver, thread: str) -> dict:
    cp = empty_checkpoint()
    versions = {"text": "1"}
    cp["channel_values"] = {"text": BIG}  # big (and incompressible) enough to be a blob
    cp["channel_versions"] = versions
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"step": 0}, versions)


def test_put_with_blobs_waits_for_the_thread_lock_in_its_blob_insert(pg_url, pg_schema) -> None:
    app = f"tl-putlock-{pg_schema}"
    with PostgresSaver.from_conn_string(
        f"{pg_url}?application_name={app}", schema=pg_schema, pool=False
    ) as saver:
        saver.setup()
        key = thread_lock_key(saver.sql, "put-lock")
        with psycopg.connect(pg_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (key,))
            done = threading.Event()
            worker = threading.Thread(target=lambda: (_put_big(saver, "put-lock"), done.set()))
            worker.start()
            query = (
                "SELECT query FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
            )
            waiting = None
            for _ in range(500):  # until the put is queued behind our lock
                waiting = holder.execute(query, (app,)).fetchone()
                if waiting:
                    break
                threading.Event().wait(0.01)
            assert waiting is not None and not done.is_set()
            assert "checkpoint_blobs" in waiting[0] and "pg_advisory_xact_lock" in waiting[0]
            holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
            worker.join(timeout=30)
        assert done.is_set()
        got = saver.get_tuple({"configurable": {"thread_id": "put-lock"}})
        assert got is not None and got.checkpoint["channel_values"]["text"] == BIG

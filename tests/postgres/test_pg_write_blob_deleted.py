"""A pessimistic put_writes racing another thread's delete of a blob it shares.

The write (in the caller's own transaction: the pessimistic plan, which no
refusal reruns) sends blob X, which another thread holds alone. Its blob insert
found X there and skipped it; the delete then removed X while the write waited
for X's row lock, and the write row went in holding a missing blob: every later
read of the thread raised CorruptBlobError. The insert now locks an existing
blob (or inserts it afresh once the delete committed), so the write row always
holds a blob that is there, counted once.

Each test stops the delete while it holds X's lock, starts the write, waits
until the server shows it blocked, lets the delete finish and checks what was
stored.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.postgres.conftest import drop_schema
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver

pytestmark = pytest.mark.postgres

META = {"source": "input", "step": -1, "parents": {}}


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    name = f"tl_wdel_{uuid.uuid4().hex[:10]}"
    yield name
    drop_schema(pg_url, name)


def put(saver: Any, thread_id: str) -> Any:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return saver.put(config, empty_checkpoint(), META, {})


def wait_locked(url: str, pid: int) -> None:
    """Until backend ``pid`` waits for a lock."""
    deadline = time.monotonic() + 5
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row and row[0] == "Lock":
                return
            time.sleep(0.02)
    raise AssertionError(f"backend {pid} never waited for a lock")


def start(fn: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


class Race:
    """Thread B holds blob X alone; thread A's write (``writes``, in a caller's
    transaction on its own connection) will hold it too."""

    def __init__(self, url: str, schema: str, merged: bool) -> None:
        self.url, self.schema = url, schema
        self.auto = psycopg.connect(url, autocommit=True)
        self.saver = PostgresSaver(self.auto, schema=schema)
        self.saver.setup()
        self.value = os.urandom(6000).hex()
        self.cfg_b = put(self.saver, "B")
        self.saver.put_writes(self.cfg_b, [("v", self.value)], "tb")
        self.cfg_a = put(self.saver, "A")
        self.writes = [("v", self.value)]
        if merged:  # A's task has a row holding another blob: the merge plan
            self.saver.put_writes(self.cfg_a, [("w", os.urandom(3000).hex())], "ta")
            self.writes = [("w", "ignored: first write of an index wins"), ("v", self.value)]
        ((self.hash, self.id),) = self.auto.execute(  # X: what B's write row holds
            f'SELECT b.hash, b.id FROM "{schema}".checkpoint_writes w'
            f' JOIN "{schema}".checkpoint_blobs b ON b.hash = w.hashes WHERE w.thread_id = %s',
            ("B",),
        ).fetchall()

    def write_a(self, use_async: bool = False) -> tuple[threading.Thread, list[BaseException]]:
        if use_async:
            thread, errors, pid = self._awrite_a()
        else:
            conn = psycopg.connect(self.url)
            writer = PostgresSaver(conn, schema=self.schema)
            pid = conn.info.backend_pid

            def run() -> None:
                with conn, conn.transaction():
                    writer.put_writes(self.cfg_a, self.writes, "ta")

            thread, errors = start(run)
        wait_locked(self.url, pid)
        return thread, errors

    def _awrite_a(self) -> tuple[threading.Thread, list[BaseException], int]:
        """A's write on AsyncPostgresSaver, its own loop in a thread."""
        opened, pids = threading.Event(), []

        async def write() -> None:
            async with await psycopg.AsyncConnection.connect(self.url) as conn:
                writer = AsyncPostgresSaver(conn, schema=self.schema)
                pids.append(conn.info.backend_pid)
                opened.set()
                async with conn.transaction():
                    await writer.aput_writes(self.cfg_a, self.writes, "ta")

        thread, errors = start(lambda: asyncio.run(write()))
        assert opened.wait(5), errors
        return thread, errors, pids[0]

    def check(self) -> None:
        """A's pending write reads back, its blob is there, counted once."""
        s = f'"{self.schema}"'
        tup = self.saver.get_tuple(self.cfg_a)
        assert ("v", self.value) in [(c, v) for _, c, v in tup.pending_writes]
        (refs,) = self.auto.execute(
            f"SELECT c.refs FROM {s}.checkpoint_blobs b JOIN {s}.checkpoint_blob_refs c"
            " ON c.id = b.id WHERE b.hash = %s",
            (self.hash,),
        ).fetchone()
        assert refs == 1  # A's hold (the delete took B's: by hand, B's row kept none)
        self.auto.close()


def put_writes_while_delete_holds(race: Race, finish: Any, use_async: bool = False) -> None:
    """Start A's write while X is locked, then ``finish`` the delete."""
    thread, errors = race.write_a(use_async)
    finish()
    thread.join(10)
    assert not thread.is_alive() and not errors, errors


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("merged", [False, True], ids=["new-row", "merged-row"])
def test_blob_deleted_while_write_waits(
    pg_url: str, schema: str, merged: bool, use_async: bool
) -> None:
    """The delete by hand: lock X, then (the write waiting) drop its count row
    and X itself, as a delete whose count reached 0 does."""
    race = Race(pg_url, schema, merged)
    s = f'"{schema}"'
    with psycopg.connect(pg_url) as other:
        other.execute(
            f"SELECT 1 FROM {s}.checkpoint_blobs WHERE hash = %s FOR UPDATE", (race.hash,)
        )

        def finish() -> None:
            other.execute(f"DELETE FROM {s}.checkpoint_blob_refs WHERE id = %s", (race.id,))
            other.execute(f"DELETE FROM {s}.checkpoint_blobs WHERE hash = %s", (race.hash,))
            other.commit()

        put_writes_while_delete_holds(race, finish, use_async)
    race.check()


def test_delete_thread_while_write_waits(pg_url: str, schema: str) -> None:
    """A real ``delete_thread("B")``, stopped after it locked X (its count
    update waits for a gate holding X's count row), while A writes."""
    race = Race(pg_url, schema, merged=False)
    s = f'"{schema}"'
    gate = psycopg.connect(pg_url)
    gate.execute(f"SELECT 1 FROM {s}.checkpoint_blob_refs WHERE id = %s FOR UPDATE", (race.id,))
    deleter_conn = psycopg.connect(pg_url, autocommit=True)
    deleter = PostgresSaver(deleter_conn, schema=schema)
    try:
        deleting, delete_errors = start(lambda: deleter.delete_thread("B"))
        wait_locked(pg_url, deleter_conn.info.backend_pid)
        put_writes_while_delete_holds(race, gate.rollback)
        deleting.join(10)
        assert not deleting.is_alive() and not delete_errors, delete_errors
    finally:
        gate.close()
        deleter_conn.close()
    assert race.saver.get_tuple(race.cfg_b) is None
    race.check()

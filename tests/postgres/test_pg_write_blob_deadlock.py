"""Two caller transactions' pessimistic put_writes sharing blobs must not deadlock.

Review4 (after 1ba7638): W's blob insert locked an existing blob E (hash
order) and kept that lock while it waited for blob N, which transaction P had
inserted and not committed; P's next put_writes then needed E and the two
deadlocked. The insert now skips E (waiting holding no lock on it) and the same
statement locks the found blobs only once that insert is done, so P goes on,
commits, and W follows: both commit, every blob counted.
"""

from __future__ import annotations

import asyncio
import os
import queue
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.postgres.conftest import drop_schema
from tests.postgres.test_pg_write_blob_deleted import put, start, wait_locked
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    name = f"tl_wdl_{uuid.uuid4().hex[:10]}"
    yield name
    drop_schema(pg_url, name)


def blob_hash(auto: Any, schema: str, thread: str) -> bytes:
    (h,) = auto.execute(
        f'SELECT hashes FROM "{schema}".checkpoint_writes WHERE thread_id = %s', (thread,)
    ).fetchone()
    return bytes(h)


def hash_order(url: str, schema: str) -> tuple[str, str]:
    """Two values, the one whose blob hash sorts first first (found in a
    scratch schema: a blob's hash does not depend on the schema)."""
    auto = psycopg.connect(url, autocommit=True)
    saver = PostgresSaver(auto, schema=schema)
    saver.setup()
    x, y = os.urandom(6000).hex(), os.urandom(6000).hex()
    saver.put_writes(put(saver, "x"), [("v", x)], "t")
    saver.put_writes(put(saver, "y"), [("v", y)], "t")
    first = blob_hash(auto, schema, "x") < blob_hash(auto, schema, "y")
    auto.close()
    return (x, y) if first else (y, x)


def start_w(url: str, schema: str, cfg: Any, writes: list, use_async: bool) -> tuple[Any, Any]:
    """W's put_writes in its own transaction (sync, or AsyncPostgresSaver on
    its own loop), started once W waits for a lock. Its deadlock_timeout is
    long: had the two deadlocked, the server would fail P, not W."""
    pid: queue.Queue[int] = queue.Queue()

    def sync() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET deadlock_timeout = '5s'")
            pid.put(conn.info.backend_pid)
            conn.autocommit = False
            with conn.transaction():
                PostgresSaver(conn, schema=schema).put_writes(cfg, writes, "tw")

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("SET deadlock_timeout = '5s'")
            pid.put(conn.info.backend_pid)
            await conn.set_autocommit(False)
            async with conn.transaction():
                await AsyncPostgresSaver(conn, schema=schema).aput_writes(cfg, writes, "tw")

    thread, errors = start(lambda: asyncio.run(run()) if use_async else sync())
    wait_locked(url, pid.get(timeout=5))
    return thread, errors


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_insert_waits_holding_no_found_blob(pg_url: str, schema: str, use_async: bool) -> None:
    """E is there (thread B holds it); P inserts N and, W's write (E and N)
    waiting for P's N, writes E: P and W both commit (1ba7638: deadlock)."""
    low, high = hash_order(pg_url, schema + "_s")
    drop_schema(pg_url, schema + "_s")
    auto = psycopg.connect(pg_url, autocommit=True)
    saver = PostgresSaver(auto, schema=schema)
    saver.setup()
    saver.put_writes(put(saver, "B"), [("v", low)], "tb")
    cfg_p, cfg_w = put(saver, "P"), put(saver, "W")
    with psycopg.connect(pg_url) as pconn:
        p_saver = PostgresSaver(pconn, schema=schema)
        with pconn.transaction():
            p_saver.put_writes(cfg_p, [("v", high)], "t1")  # N inserted, uncommitted
            writes = [("a", low), ("b", high)]
            thread, errors = start_w(pg_url, schema, cfg_w, writes, use_async)  # waits for N
            p_saver.put_writes(cfg_p, [("v", low)], "t2")  # P needs E
        thread.join(10)
        assert not thread.is_alive() and not errors, errors
    got = {c: v for _, c, v in saver.get_tuple(cfg_w).pending_writes}
    assert got == {"a": low, "b": high}
    assert [v for _, _, v in saver.get_tuple(cfg_p).pending_writes] == [high, low]
    refs = dict(
        auto.execute(
            f'SELECT b.hash, c.refs FROM "{schema}".checkpoint_blobs b'
            f' JOIN "{schema}".checkpoint_blob_refs c ON c.id = b.id'
        ).fetchall()
    )
    assert sorted(refs.values()) == [2, 3]  # N: P and W; E: B, P and W
    auto.close()

"""PostgresSaver / AsyncPostgresSaver: round trips, connection kinds, filters."""

from __future__ import annotations

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver
from threadloom.errors import ConfigError, StorageError

pytestmark = pytest.mark.postgres


def checkpoint(values: dict, versions: dict) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp


def cfg(thread: str, checkpoint_id: str | None = None) -> dict:
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def put_steps(saver: PostgresSaver, thread: str, n: int) -> list[dict]:
    """n checkpoints, each appending to a list and changing a big string."""
    configs, parent = [], cfg(thread)
    for i in range(n):
        values = {"messages": list(range(i + 1)), "text": "x" * 100 + str(i)}
        versions = {"messages": f"{i + 1}", "text": f"{i + 1}"}
        meta = {
            "source": "loop",
            "step": i,
            "owner": thread,
            "tags": ["a", "b"] if i % 2 else ["a"],
        }
        parent = saver.put(parent, checkpoint(values, versions), meta, versions)
        configs.append(parent)
    return configs


@pytest.fixture
def saver(pg_url: str, pg_schema: str):
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as s:
        s.setup()
        yield s


def test_round_trip_history_and_writes(saver: PostgresSaver) -> None:
    configs = put_steps(saver, "rt", 4)
    saver.put_writes(configs[-1], [("messages", [9]), ("__interrupt__", "stop")], "task-1")
    latest = saver.get_tuple(cfg("rt"))
    assert latest.config == configs[-1]
    assert latest.checkpoint["channel_values"]["messages"] == [0, 1, 2, 3]
    assert latest.parent_config == configs[-2]
    # special writes have negative indices, so they come first
    assert latest.pending_writes == [
        ("task-1", "__interrupt__", "stop"),
        ("task-1", "messages", [9]),
    ]
    old = saver.get_tuple(configs[1])
    assert old.checkpoint["channel_values"] == {"messages": [0, 1], "text": "x" * 100 + "1"}
    history = list(saver.list(cfg("rt")))
    assert [t.config for t in history] == configs[::-1]
    assert [t.config for t in saver.list(cfg("rt"), before=configs[2], limit=1)] == [configs[1]]


def test_metadata_filter_is_exact_and_validated(saver: PostgresSaver) -> None:
    put_steps(saver, "flt", 4)
    steps = [t.metadata["step"] for t in saver.list(cfg("flt"), filter={"tags": ["a"]})]
    assert steps == [2, 0]  # containment alone would also return ["a", "b"]
    found = saver.list(None, filter={"step": 3, "owner": "flt"})
    assert [t.metadata["step"] for t in found] == [3]
    with pytest.raises(ConfigError):
        list(saver.list(None, filter={'bad key"': 1}))
    assert list(saver.list(None, filter={"bad key'": 1})) == []  # a literal key, bound


def test_unchanged_values_are_stored_once(saver: PostgresSaver) -> None:
    parent = cfg("dedup")
    for i in range(5):
        versions = {"doc": "1", "n": str(i + 1)}
        cp = checkpoint({"doc": "y" * 5000, "n": i}, versions)
        parent = saver.put(parent, cp, {"step": i}, versions if i == 0 else {"n": str(i + 1)})
    stats = saver.stats("dedup")
    assert stats["checkpoints"] == 5
    assert stats["blob_bytes"] < 5000 * 2


def test_pool_connection_and_caller_pipeline(pg_url: str, pg_schema: str) -> None:
    with ConnectionPool(pg_url, min_size=1, max_size=2, open=True) as pool:
        s = PostgresSaver(pool, schema=pg_schema)
        s.setup()
        configs = put_steps(s, "pool", 2)
        assert s.get_tuple(cfg("pool")).config == configs[-1]
    with psycopg.connect(pg_url, autocommit=True) as conn, conn.pipeline() as pipe:
        s = PostgresSaver(conn, pipe, schema=pg_schema)
        configs = put_steps(s, "pipe", 2)
        assert s.get_tuple(cfg("pipe")).config == configs[-1]
    with psycopg.connect(pg_url) as conn:  # not autocommit: the saver commits its own work
        s = PostgresSaver(conn, schema=pg_schema)
        put_steps(s, "plain", 1)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert PostgresSaver(conn, schema=pg_schema).get_tuple(cfg("plain")) is not None


def test_invalid_schema_name_is_rejected(pg_url: str) -> None:
    with pytest.raises(ConfigError, match="schema"):
        with PostgresSaver.from_conn_string(pg_url, schema='x"; drop table y; --'):
            pass


def test_missing_tables_say_call_setup(pg_url: str, fresh_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as s:
        with pytest.raises(StorageError, match="setup"):
            s.get_tuple(cfg("t"))


async def test_async_saver_round_trip(pg_url: str, pg_schema: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema, pool=True) as s:
        await s.setup()
        parent = cfg("async")
        for i in range(3):
            versions = {"messages": str(i + 1)}
            cp = checkpoint({"messages": list(range(i + 1))}, versions)
            parent = await s.aput(parent, cp, {"step": i}, versions)
        await s.aput_writes(parent, [("messages", [7])], "t1")
        tup = await s.aget_tuple(cfg("async"))
        assert tup.checkpoint["channel_values"]["messages"] == [0, 1, 2]
        assert tup.pending_writes == [("t1", "messages", [7])]
        assert len([t async for t in s.alist(cfg("async"))]) == 3
        with pytest.raises(StorageError, match="event loop"):
            s.get_tuple(cfg("async"))  # sync call from the saver's own loop
        await s.adelete_thread("async")
        assert await s.aget_tuple(cfg("async")) is None


async def test_async_saver_on_caller_pool(pg_url: str, pg_schema: str) -> None:
    async with AsyncConnectionPool(pg_url, min_size=1, max_size=2, open=False) as pool:
        s = AsyncPostgresSaver(pool, schema=pg_schema)
        await s.setup()
        versions = {"a": "1"}
        saved = await s.aput(cfg("apool"), checkpoint({"a": 1}, versions), {}, versions)
        assert (await s.aget_tuple(cfg("apool"))).config == saved

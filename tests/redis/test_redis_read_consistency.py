"""Torn reads on Redis: a read is several commands (no MULTI), so a
``delete_thread`` or ``prune`` from another process can land between the
checkpoint lookup and the blob lookup. The driver runs such a read once more
(storage/rereads.py); Redis has no snapshot to give that re-run, but a thread
deleted mid-read is then simply absent. Same scenarios as
tests/postgres/test_pg_read_consistency.py."""

from __future__ import annotations

from typing import Any

import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver
from threadloom.checkpoint.storage import ops
from threadloom.errors import CorruptBlobError

pytestmark = pytest.mark.redis

CID = "1ef00000-0000-6000-8000-0000000000"
THREAD = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def seed(saver: RedisSaver, n: int = 1) -> None:
    cfg: dict[str, Any] = dict(THREAD)
    for i in range(n):
        c = empty_checkpoint()
        c["id"] = f"{CID}{i + 1:02d}"
        c["channel_values"] = {"doc": f"{i}" + "v" * 700}
        c["channel_versions"] = {"doc": str(i + 1)}
        cfg = saver.put(cfg, c, {"step": i}, {"doc": str(i + 1)})
        saver.put_writes(cfg, [("doc", f"{i}" + "w" * 700)], f"task-{i}")


def after(saver: Any, when: type, action: Any) -> list[int]:
    """Run ``action()`` once, right after ``saver`` executes an op of type ``when``."""
    fired: list[int] = []
    name = "aexecute" if isinstance(saver, AsyncRedisSaver) else "execute"
    real = getattr(saver, name)

    def execute(op: Any) -> Any:
        out = real(op)
        if type(op) is when and not fired:
            fired.append(1)
            action()
        return out

    async def aexecute(op: Any) -> Any:
        out = await real(op)
        if type(op) is when and not fired:
            fired.append(1)
            await action()
        return out

    setattr(saver, name, execute if name == "execute" else aexecute)
    return fired


@pytest.fixture
def pair(redis_client, key_prefix: str):
    writer = RedisSaver(redis_client, key_prefix=key_prefix)
    reader = RedisSaver(redis_client, key_prefix=key_prefix)  # caches nothing yet
    return writer, reader


def test_a_delete_mid_get_tuple_returns_nothing(pair) -> None:
    writer, reader = pair
    seed(writer)
    fired = after(reader, ops.LoadRefs, lambda: writer.delete_thread("t"))
    assert reader.get_tuple(THREAD) is None
    assert fired


def test_refs_deleted_before_the_refs_lookup(pair) -> None:
    """A delete between the row lookup and the refs lookup: the refs come back
    empty, which reads like channels without a value; the rows are checked
    again after the refs (redis/seenrows.py), so the read runs again and finds
    nothing instead of the checkpoint without its values (session 6)."""
    writer, reader = pair
    seed(writer)
    fired = after(reader, ops.GetCheckpoint, lambda: writer.delete_thread("t"))
    assert reader.get_tuple(THREAD) is None
    assert fired


def test_refs_deleted_before_the_refs_lookup_of_a_list(pair) -> None:
    writer, reader = pair
    seed(writer, n=3)
    fired = after(reader, ops.ListCheckpoints, lambda: writer.delete_thread("t"))
    assert list(reader.list({"configurable": {"thread_id": "t"}})) == []
    assert fired


def test_a_channel_without_a_value_reads_in_one_run(pair) -> None:
    writer, reader = pair
    c = empty_checkpoint()
    c["id"] = f"{CID}01"
    c["channel_values"] = {"doc": "v" * 700}
    c["channel_versions"] = {"doc": "1", "branch:to:x": "2"}
    writer.put(THREAD, c, {}, {"doc": "1", "branch:to:x": "2"})
    lookups: list[type] = []
    real = reader.execute

    def execute(op: Any) -> Any:
        lookups.append(type(op))
        return real(op)

    reader.execute = execute  # type: ignore[method-assign]
    got = reader.get_tuple(THREAD)
    assert got is not None and got.checkpoint["channel_values"] == {"doc": "v" * 700}
    assert got.checkpoint["channel_versions"]["branch:to:x"] == "2"
    assert lookups.count(ops.GetCheckpoint) == 1  # no re-run


def test_a_prune_mid_list_returns_whole_tuples(pair) -> None:
    writer, reader = pair
    seed(writer, n=4)
    fired = after(reader, ops.LoadRefs, lambda: writer.prune(["t"], strategy="keep_latest"))
    listed = list(reader.list({"configurable": {"thread_id": "t"}}))
    assert fired
    assert [t.checkpoint["channel_values"] for t in listed] == [{"doc": "3" + "v" * 700}]
    assert [t.pending_writes for t in listed] == [[("task-3", "doc", "3" + "w" * 700)]]


def test_a_blob_missing_twice_is_corrupt(pair, redis_client, key_prefix: str) -> None:
    writer, reader = pair
    seed(writer)
    blob_keys = [k for k in redis_client.scan_iter(match=f"{{{key_prefix}:*") if b"blob" in k]
    assert blob_keys
    redis_client.delete(*blob_keys)
    with pytest.raises(CorruptBlobError, match=r"blob [0-9a-f]+ .*missing"):
        reader.get_tuple(THREAD)


async def test_async_saver_delete_mid_read(redis_url: str, key_prefix: str) -> None:
    async with (
        AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as writer,
        AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as reader,
    ):
        c = empty_checkpoint()
        c["id"] = f"{CID}01"
        c["channel_values"] = {"doc": "v" * 700}
        c["channel_versions"] = {"doc": "1"}
        cfg = await writer.aput(THREAD, c, {}, {"doc": "1"})
        await writer.aput_writes(cfg, [("doc", "w" * 700)], "task-1")
        fired = after(reader, ops.LoadRefs, lambda: writer.adelete_thread("t"))
        assert [t async for t in reader.alist({"configurable": {"thread_id": "t"}})] == []
        assert fired


def seed_runtime(saver: RedisSaver, values: bool) -> None:
    """One checkpoint with a pending write: ``values``, one value at a runtime
    version (a reader keeps its ref and recipe: a warm re-read sends no refs
    lookup); else an input checkpoint with only its ``__start__`` write."""
    c = empty_checkpoint()
    c["id"] = f"{CID}01"
    versions = {}
    if values:
        versions = {"doc": saver.get_next_version(None, None)}
        c["channel_values"], c["channel_versions"] = {"doc": "v" * 700}, dict(versions)
    cfg = saver.put(dict(THREAD), c, {"step": 0}, versions)
    saver.put_writes(cfg, [("__start__", "w" * 700)], "task-0")


def logged(saver: Any) -> list[type]:
    """The types of the ops ``saver`` executes from now on."""
    log: list[type] = []
    real = saver.execute

    def execute(op: Any) -> Any:
        log.append(type(op))
        return real(op)

    saver.execute = execute
    return log


WRITES_CASES = [
    pytest.param(True, "get", id="warm-get_tuple"),
    pytest.param(True, "list", id="warm-list"),
    pytest.param(False, "get", id="valueless-get_tuple"),
    pytest.param(False, "list", id="valueless-list"),
]


@pytest.mark.parametrize(("values", "how"), WRITES_CASES)
def test_writes_deleted_before_a_read_without_refs_lookup(pair, values: bool, how: str) -> None:
    """A delete between the row lookup and the writes lookup of a read that
    sends no refs lookup (a warm reader, a checkpoint without values) used to
    return the checkpoint without its pending writes; the writes lookup reads
    the rows again after the writes (redis/seenrows.py): the read re-runs and
    finds nothing (review, session 6)."""
    writer, reader = pair
    seed_runtime(writer, values)
    if how == "get":
        read = lambda: [t for t in [reader.get_tuple(THREAD)] if t is not None]  # noqa: E731
    else:
        read = lambda: list(reader.list(THREAD))  # noqa: E731
    (warm,) = read()
    assert warm.pending_writes == [("task-0", "__start__", "w" * 700)]
    log = logged(reader)
    row_op = ops.GetCheckpoint if how == "get" else ops.ListCheckpoints
    fired = after(reader, row_op, lambda: writer.delete_thread("t"))
    assert read() == []
    assert fired and ops.LoadRefs not in log
    assert log.count(row_op) == 2  # torn, then re-run
    writer.delete_thread("t")
    seed_runtime(writer, values)
    log.clear()
    (whole,) = read()  # untorn: read once, writes intact
    assert whole.pending_writes == warm.pending_writes and log.count(row_op) == 1


@pytest.mark.parametrize(("values", "how"), WRITES_CASES)
async def test_async_writes_deleted_before_a_read_without_refs_lookup(
    redis_url: str, key_prefix: str, values: bool, how: str
) -> None:
    async with (
        AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as writer,
        AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as reader,
    ):
        c = empty_checkpoint()
        c["id"] = f"{CID}01"
        versions = {"doc": writer.get_next_version(None, None)} if values else {}
        if values:
            c["channel_values"], c["channel_versions"] = {"doc": "v" * 700}, dict(versions)
        cfg = await writer.aput(dict(THREAD), c, {"step": 0}, versions)
        await writer.aput_writes(cfg, [("__start__", "w" * 700)], "task-0")

        async def read() -> list[Any]:
            if how == "get":
                return [t for t in [await reader.aget_tuple(THREAD)] if t is not None]
            return [t async for t in reader.alist(THREAD)]

        (warm,) = await read()
        assert warm.pending_writes == [("task-0", "__start__", "w" * 700)]
        row_op = ops.GetCheckpoint if how == "get" else ops.ListCheckpoints
        fired = after(reader, row_op, lambda: writer.adelete_thread("t"))
        assert await read() == []
        assert fired

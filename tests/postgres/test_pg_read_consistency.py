"""Torn reads (found in review, session 3; fixed in session 4).

A Postgres read on an autocommit connection runs each statement in its own
snapshot, so a ``delete_thread`` or ``prune`` committed by another process
between a read's row lookup and its ref/blob lookups used to make ``list()`` /
``get_tuple()`` raise ``CorruptBlobError`` ("blob ... is missing") or return a
checkpoint without some channel values. The driver now notices (a missing blob,
diff base or ref row) and runs the read once more in one REPEATABLE READ READ
ONLY transaction (storage/rereads.py): the caller gets the checkpoint as it was
or nothing, and what is still missing in one snapshot is reported as corrupt.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver
from threadloom.checkpoint.storage import ops
from threadloom.errors import CorruptBlobError

pytestmark = pytest.mark.postgres

CID = "1ef00000-0000-6000-8000-000000000001"
THREAD = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def seed(saver: PostgresSaver, n: int = 1, v: str = "v") -> list[dict[str, Any]]:
    """``n`` checkpoints of thread "t", each with its own blob value (``v`` * 700)
    and a pending write holding a blob; returns their configs, oldest first."""
    cfg: dict[str, Any] = dict(THREAD)
    out = []
    for i in range(n):
        c = empty_checkpoint()
        c["id"] = CID[:-2] + f"{i + 1:02d}"
        c["channel_values"] = {"doc": f"{i}" + v * 700}
        c["channel_versions"] = {"doc": str(i + 1)}
        cfg = saver.put(cfg, c, {"step": i}, {"doc": str(i + 1)})
        saver.put_writes(cfg, [("doc", f"{i}" + "w" * 700)], f"task-{i}")
        out.append(cfg)
    return out


def hook(saver: Any, when: type, action: Callable[[int], Any], times: int = 1) -> list[int]:
    """Run ``action(n)`` (another process's commit; awaited when it returns an
    awaitable) right after the first ``times`` operations of type ``when`` that
    ``saver`` executes; returns the firings."""
    fired: list[int] = []
    if not isinstance(saver, AsyncPostgresSaver):
        real = saver.executor.execute

        def execute(op: Any) -> Any:
            out = real(op)
            if type(op) is when and len(fired) < times:
                fired.append(1)
                action(len(fired))
            return out

        saver.executor.execute = execute
        return fired
    areal = saver.executor.aexecute

    async def aexecute(op: Any) -> Any:
        out = await areal(op)
        if type(op) is when and len(fired) < times:
            fired.append(1)
            result = action(len(fired))
            if inspect.isawaitable(result):
                await result
        return out

    saver.executor.aexecute = aexecute
    return fired


@pytest.fixture
def pair(pg_url: str, fresh_schema: str):
    with (
        PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as a,
        PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as b,
    ):
        a.setup()
        yield a, b


def reader(saver: PostgresSaver, snapshot_reads: bool = False) -> PostgresSaver:
    """Another saver on ``saver``'s connection, nothing cached (a writer keeps
    the blobs it wrote, and a read served from them cannot tear)."""
    fresh = PostgresSaver(saver.connector.conn, schema=saver.sql.schema)
    fresh.connector.snapshot_reads = snapshot_reads
    return fresh


def test_a_delete_between_two_statements_of_a_read_is_not_a_corrupt_blob(pair) -> None:
    a, b = pair
    seed(a)
    r = reader(a)
    fired = hook(r, ops.LoadRefs, lambda n: b.delete_thread("t"))
    listed = [t.checkpoint["id"] for t in r.list({"configurable": {"thread_id": "t"}})]
    assert fired and listed == []  # the re-run saw the thread gone


def test_get_tuple_torn_by_a_delete_returns_nothing(pair) -> None:
    a, b = pair
    seed(a)
    r = reader(a)
    fired = hook(r, ops.LoadRefs, lambda n: b.delete_thread("t"))
    assert r.get_tuple(THREAD) is None
    assert fired


def test_refs_deleted_before_the_refs_lookup(pair) -> None:
    """The refs lookup finds no rows, which a reader cannot tell from channels
    without a value; it also checks, in its own snapshot, that the checkpoint
    row it serves is still there (postgres/seenrows.py), so the read re-runs
    and finds nothing, instead of the checkpoint without its values (session 6)."""
    a, b = pair
    seed(a)
    r = reader(a)
    fired = hook(r, ops.GetCheckpoint, lambda n: b.delete_thread("t"))
    assert r.get_tuple(THREAD) is None
    assert fired


def test_refs_deleted_before_the_refs_lookup_of_a_list(pair) -> None:
    a, b = pair
    seed(a, n=3)
    r = reader(a)
    fired = hook(r, ops.ListCheckpoints, lambda n: b.delete_thread("t"))
    assert list(r.list({"configurable": {"thread_id": "t"}})) == []
    assert fired


def test_refs_pruned_before_the_refs_lookup(pair) -> None:
    """An older checkpoint read by id, pruned (row and the refs only it held)
    right after its row was found: the read re-runs and finds nothing."""
    a, b = pair
    configs = seed(a, n=3)
    r = reader(a)
    fired = hook(r, ops.GetCheckpoint, lambda n: b.prune(["t"], strategy="keep_latest"))
    assert r.get_tuple(configs[0]) is None
    assert fired
    latest = r.get_tuple(THREAD)
    assert latest is not None and latest.checkpoint["channel_values"] == {"doc": "2" + "v" * 700}


def test_a_channel_without_a_value_reads_in_one_run(pair) -> None:
    """The refs check does not fire for a channel that has a version but no
    value (no ref row, the checkpoint row still there): no re-run."""
    a, _ = pair
    c = empty_checkpoint()
    c["id"] = CID
    c["channel_values"] = {"doc": "v" * 700}
    c["channel_versions"] = {"doc": "1", "branch:to:x": "2"}
    a.put(THREAD, c, {}, {"doc": "1", "branch:to:x": "2"})
    r = reader(a)
    rows: list[int] = []
    hook(r, ops.GetCheckpoint, lambda n: rows.append(n), times=5)
    got = r.get_tuple(THREAD)
    assert got is not None and got.checkpoint["channel_values"] == {"doc": "v" * 700}
    assert got.checkpoint["channel_versions"]["branch:to:x"] == "2"
    assert rows == [1]  # one row lookup: the read did not run again


async def test_async_refs_deleted_before_the_refs_lookup(pg_url: str, fresh_schema: str) -> None:
    async with (
        AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as a,
        AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as b,
    ):
        await a.setup()
        await aseed(b)
        fired = hook(a, ops.GetCheckpoint, lambda n: b.adelete_thread("t"))
        assert await a.aget_tuple(THREAD) is None
        assert fired


@pytest.mark.parametrize(
    "when", [ops.GetCheckpoint, ops.LoadWrites, ops.LoadRefs, ops.ListCheckpoints]
)
def test_snapshot_reads_never_tear(pair, when: type) -> None:
    a, b = pair
    seed(a, n=3)
    r = reader(a, snapshot_reads=True)
    fired = hook(r, when, lambda n: b.delete_thread("t"))
    if when is ops.ListCheckpoints:
        listed = list(r.list({"configurable": {"thread_id": "t"}}))
        assert [t.checkpoint["channel_values"]["doc"][0] for t in listed] == ["2", "1", "0"]
        assert all(len(t.pending_writes) == 1 for t in listed)
    else:
        got = r.get_tuple(THREAD)
        assert got is not None and got.checkpoint["channel_values"] == {"doc": "2" + "v" * 700}
        assert got.pending_writes == [("task-2", "doc", "2" + "w" * 700)]
    assert fired


def test_the_rerun_is_one_snapshot(pair) -> None:
    """The thread is rewritten (same ids and versions, other values) mid-read,
    and deleted again while the re-run reads: in one REPEATABLE READ snapshot
    the re-run still reads the whole rewritten tuple."""
    a, b = pair
    seed(a)

    def tear(n: int) -> None:
        b.delete_thread("t")
        if n == 1:
            seed(b, v="x")

    reader = PostgresSaver(a.connector.conn, schema=a.sql.schema)  # nothing cached
    fired = hook(reader, ops.LoadRefs, tear, times=2)
    got = reader.get_tuple(THREAD)
    assert len(fired) == 2
    assert got is not None and got.checkpoint["channel_values"] == {"doc": "0" + "x" * 700}
    assert got.pending_writes == [("task-0", "doc", "0" + "w" * 700)]


def test_a_prune_between_two_statements_of_a_list(pair) -> None:
    """list() of a history pruned mid-read: every tuple it returns is whole."""
    a, b = pair
    configs = seed(a, n=4)
    r = reader(a)
    fired = hook(r, ops.LoadRefs, lambda n: b.prune(["t"], strategy="keep_latest"))
    listed = list(r.list({"configurable": {"thread_id": "t"}}))
    assert fired
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [
        configs[-1]["configurable"]["checkpoint_id"]
    ]
    (only,) = listed
    assert only.checkpoint["channel_values"] == {"doc": "3" + "v" * 700}
    assert only.pending_writes == [("task-3", "doc", "3" + "w" * 700)]


def test_a_torn_later_page_goes_on_after_what_was_yielded(pair) -> None:
    """A lazy list torn on its second page re-runs and continues after the last
    item it yielded (none twice, none out of order)."""
    a, b = pair
    configs = seed(a, n=12)
    ids = [c["configurable"]["checkpoint_id"] for c in reversed(configs)]

    listed, fired = [], []
    for item in a.list({"configurable": {"thread_id": "t"}}, limit=40):  # pages of 8, 16
        listed.append(item.config["configurable"]["checkpoint_id"])
        if len(listed) == 8:  # page 1 (8 items) consumed: page 2 tears
            fired = hook(
                a, ops.LoadWrites, lambda n: b.prune(["t"], strategy="keep_last_n", keep_last=10)
            )
    assert fired
    assert listed == ids[:10]  # the 11th was pruned; the 9th and 10th once each


async def test_async_saver_torn_reads(pg_url: str, fresh_schema: str) -> None:
    async with (
        AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as a,
        AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as b,
    ):
        await a.setup()
        await aseed(b)  # (a caches nothing it reads: a read served from cache cannot tear)
        fired = hook(a, ops.LoadRefs, lambda n: b.adelete_thread("t"), times=2)
        assert [t async for t in a.alist({"configurable": {"thread_id": "t"}})] == []
        await aseed(b)
        assert await a.aget_tuple(THREAD) is None
        assert len(fired) == 2


async def aseed(saver: AsyncPostgresSaver) -> None:
    c = empty_checkpoint()
    c["id"] = CID
    c["channel_values"] = {"doc": "v" * 700}
    c["channel_versions"] = {"doc": "1"}
    cfg = await saver.aput(THREAD, c, {}, {"doc": "1"})
    await saver.aput_writes(cfg, [("doc", "w" * 700)], "task-1")


def test_a_blob_missing_in_one_snapshot_is_still_corrupt(pair, pg_url: str) -> None:
    a, b = pair
    seed(a)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {a.sql.blobs}")
    fresh = PostgresSaver(a.connector.conn, schema=a.sql.schema)
    with pytest.raises(CorruptBlobError, match=r"blob [0-9a-f]+ .*missing"):
        fresh.get_tuple(THREAD)


def seed_runtime(saver: Any, values: bool = True) -> None:
    """One checkpoint of thread "t" with a pending write. ``values``: one value
    at a version like the runtime's (with a random part, so a reader keeps its
    ref and recipe: a warm re-read sends no refs lookup); else an input
    checkpoint, no values, only its ``__start__`` write (no refs lookup ever)."""
    c = empty_checkpoint()
    c["id"] = CID
    if values:
        v1 = saver.get_next_version(None, None)
        c["channel_values"], c["channel_versions"] = {"doc": "v" * 700}, {"doc": v1}
        cfg = saver.put(dict(THREAD), c, {"step": 0}, {"doc": v1})
        saver.put_writes(cfg, [("doc", "w" * 700)], "task-0")
    else:
        cfg = saver.put(dict(THREAD), c, {"step": -1}, {})
        saver.put_writes(cfg, [("__start__", {"x": "w" * 700})], "task-0")


def sent(saver: Any) -> list[type]:
    """The types of the ops ``saver`` executes from now on (sync or async)."""
    log: list[type] = []
    name = "aexecute" if isinstance(saver, AsyncPostgresSaver) else "execute"
    real = getattr(saver.executor, name)
    if name == "execute":
        setattr(saver.executor, name, lambda op: (log.append(type(op)), real(op))[1])
    else:

        async def aexecute(op: Any) -> Any:
            log.append(type(op))
            return await real(op)

        saver.executor.aexecute = aexecute
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
    sends no refs lookup (a warm reader, or a checkpoint without values) used
    to return the checkpoint with no pending writes; the writes lookup checks
    the rows too (postgres/seenrows.py), so the read re-runs and finds nothing
    (review, session 6)."""
    a, b = pair
    seed_runtime(a, values)
    r = reader(a)
    read = (lambda: [r.get_tuple(THREAD)]) if how == "get" else (lambda: list(r.list(THREAD)))
    (warm,) = read()  # warms r's caches (refs, recipes) when there are values
    assert warm.pending_writes and len(warm.pending_writes[0][2]) in (1, 700)
    log = sent(r)
    row_op = ops.GetCheckpoint if how == "get" else ops.ListCheckpoints
    fired = hook(r, row_op, lambda n: b.delete_thread("t"))
    assert [t for t in read() if t is not None] == []
    assert fired and ops.LoadRefs not in log
    assert log.count(row_op) == 2  # torn, then re-run


@pytest.mark.parametrize(("values", "how"), WRITES_CASES)
def test_an_untorn_read_without_refs_lookup_runs_once(pair, values: bool, how: str) -> None:
    a, _ = pair
    seed_runtime(a, values)
    r = reader(a)
    read = (lambda: [r.get_tuple(THREAD)]) if how == "get" else (lambda: list(r.list(THREAD)))
    (first,) = read()
    log = sent(r)
    (again,) = read()
    assert again.pending_writes == first.pending_writes and len(again.pending_writes) == 1
    assert again.checkpoint["channel_values"] == first.checkpoint["channel_values"]
    assert log.count(ops.GetCheckpoint) + log.count(ops.ListCheckpoints) == 1


@pytest.mark.parametrize(("values", "how"), WRITES_CASES)
async def test_async_writes_deleted_before_a_read_without_refs_lookup(
    pg_url: str, fresh_schema: str, values: bool, how: str
) -> None:
    async with (
        AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as a,
        AsyncPostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as b,
    ):
        await a.setup()
        c = empty_checkpoint()
        c["id"] = CID
        if values:
            v1 = b.get_next_version(None, None)
            c["channel_values"], c["channel_versions"] = {"doc": "v" * 700}, {"doc": v1}
            cfg = await b.aput(dict(THREAD), c, {"step": 0}, {"doc": v1})
        else:
            cfg = await b.aput(dict(THREAD), c, {"step": -1}, {})
        await b.aput_writes(cfg, [("__start__", "w" * 700)], "task-0")

        async def read() -> list[Any]:
            if how == "get":
                return [t for t in [await a.aget_tuple(THREAD)] if t is not None]
            return [t async for t in a.alist(THREAD)]

        (warm,) = await read()
        assert warm.pending_writes == [("task-0", "__start__", "w" * 700)]
        log = sent(a)
        row_op = ops.GetCheckpoint if how == "get" else ops.ListCheckpoints
        fired = hook(a, row_op, lambda n: b.adelete_thread("t"))
        assert await read() == []
        assert fired and ops.LoadRefs not in log

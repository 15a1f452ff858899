"""Retention over many threads runs in steps of whole threads, one transaction
each (storage/batching.py): a prune of 75,000 threads held SQLite's write lock
for 84 s, and on Postgres one advisory lock per thread to the end (25,000 ids
ran out of max_locks_per_transaction). Reports, dry runs, ``before`` and
``delete_for_runs`` must come out as they did in one transaction."""

from __future__ import annotations

import pytest

from tests.savers.test_retention import grow, ids
from threadloom.checkpoint.storage import batching, ops


@pytest.fixture
def small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "MAX_THREADS", 2)


def _count_writes(saver, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the write transactions the saver runs (its ``_run``/``_arun``)."""
    writes = [0]
    raw = saver.raw
    name = "_run" if saver.mode == "sync" else "_arun"
    inner = getattr(raw, name)

    def counted(flow, write=False):
        writes[0] += bool(write)
        return inner(flow, write)

    monkeypatch.setattr(raw, name, counted)
    return writes


async def test_prune_of_many_threads_commits_in_steps(saver, small_steps, monkeypatch) -> None:
    for i in range(7):
        await grow(saver, 3, f"t{i}")
    writes = _count_writes(saver, monkeypatch)
    report = await saver.prune([f"t{i}" for i in range(7)], strategy="keep_latest")
    assert writes[0] == 4  # 2 + 2 + 2 + 1 threads
    assert report.checkpoints == 14 and not report.dry_run
    for i in range(7):
        assert len(await ids(saver, f"t{i}")) == 1


async def test_dry_run_reports_what_the_stepped_run_does(saver, small_steps) -> None:
    """Threads share blobs (the same large value): a blob goes only with the last
    thread holding it, in whichever step that is; the dry run must count it once."""
    names = [f"s{i}" for i in range(5)]
    for name in [*names, "survivor"]:
        await grow(saver, 4, name)
    dry = await saver.prune(names, strategy="delete", dry_run=True)
    real = await saver.prune(names, strategy="delete")
    assert dry._replace(dry_run=False) == real and dry.dry_run
    assert real.blobs > 0 and real.checkpoints == 20
    assert len(await ids(saver, "survivor")) == 4
    got = await saver.get_tuple({"configurable": {"thread_id": "survivor"}})
    assert got.checkpoint["channel_values"]["doc"]["body"]  # the shared blob survived
    await saver.prune(["survivor"], strategy="delete")
    counts = await saver.raw_counts()
    assert counts == {"checkpoints": 0, "refs": 0, "blobs": 0, "writes": 0}


async def test_before_is_checked_once_for_all_steps(saver, small_steps) -> None:
    configs = {f"b{i}": await grow(saver, 4, f"b{i}") for i in range(5)}
    cut = configs["b3"][2]["configurable"]["checkpoint_id"]  # a step without b3 must not refuse
    report = await saver.prune(list(configs), strategy="before", before=cut)
    assert report.checkpoints > 0
    assert cut in await ids(saver, "b3")


async def test_delete_for_runs_over_many_threads(saver, small_steps, monkeypatch) -> None:
    for i in range(5):
        await grow(saver, 2, f"r{i}", run="doomed")
        await grow(saver, 2, f"r{i}", run="kept", start=2)
    writes = _count_writes(saver, monkeypatch)
    await saver.delete_for_runs(["doomed"])
    assert writes[0] == 3
    for i in range(5):
        assert len(await ids(saver, f"r{i}")) == 2


async def test_delete_for_runs_searches_the_runs_once_per_call(
    saver, small_steps, monkeypatch
) -> None:
    """Every step searched ALL the call's runs again (then kept its own threads),
    inside its write transaction: 5,000 runs on SQLite took 220 s, not 0.9 s.
    The call searches once to find the threads and once after the steps (a
    thread the runs wrote meanwhile); a step reads only its own threads, and
    still deletes all of a thread's checkpoints of the runs, every namespace."""
    for i in range(9):
        await grow(saver, 2, f"q{i}", run="doomed")
        await grow(saver, 1, f"q{i}", ns="child:1", run="doomed")
        await grow(saver, 2, f"q{i}", run="kept", start=2)
    searches = _count_ops(saver, monkeypatch, ops.FindRunCheckpoints)
    writes = _count_writes(saver, monkeypatch)
    await saver.delete_for_runs(["doomed"])
    assert writes[0] == 5  # 2 + 2 + 2 + 2 + 1 threads
    assert searches[0] == 2  # was 7: one more per step
    for i in range(9):
        assert len(await ids(saver, f"q{i}")) == 2
        assert await ids(saver, f"q{i}", "child:1") == []


def _count_ops(saver, monkeypatch: pytest.MonkeyPatch, kind: type) -> list[int]:
    """Counts the ``kind`` operations the saver's executor runs (Redis: the saver)."""
    seen = [0]
    ex = getattr(saver.raw, "executor", saver.raw)
    inner, ainner = getattr(ex, "execute", None), getattr(ex, "aexecute", None)

    def look(op):
        seen[0] += type(op) is kind
        return inner(op)

    async def alook(op):
        seen[0] += type(op) is kind
        return await ainner(op)

    if inner is not None:
        monkeypatch.setattr(ex, "execute", look)
    if ainner is not None:
        monkeypatch.setattr(ex, "aexecute", alook)
    return seen


async def test_step_commits_before_the_next_begins(
    saver, small_steps, monkeypatch, tmp_path
) -> None:
    """What other writers see: when the last thread's checkpoints are deleted, the
    first thread's deletion is already committed (read from another connection
    on SQLite and Postgres), so a writer waiting on the lock got in between."""
    kind = saver.backend.name
    if kind not in ("sqlite-file", "sqlite-async") and not kind.startswith("postgres"):
        pytest.skip("read from another connection: SQLite files and Postgres")
    for i in range(6):
        await grow(saver, 2, f"v{i}")
    seen: list[int] = []
    ex = saver.raw.executor
    inner = ex.execute  # async SQLite runs flows on a worker thread, sync

    def look(op):
        if type(op) is ops.DeleteCheckpoints and op.thread_id == "v5":
            seen.append(_committed_rows(saver, "v0", tmp_path))
        return inner(op)

    monkeypatch.setattr(ex, "execute", look)
    if hasattr(ex, "aexecute"):  # AsyncPostgresSaver drives flows on its loop
        ainner = ex.aexecute

        async def alook(op):
            if type(op) is ops.DeleteCheckpoints and op.thread_id == "v5":
                seen.append(_committed_rows(saver, "v0", tmp_path))
            return await ainner(op)

        monkeypatch.setattr(ex, "aexecute", alook)
    await saver.prune([f"v{i}" for i in range(6)], strategy="keep_latest")
    assert seen == [1]  # v0 pruned to its latest and committed


def _committed_rows(saver, thread: str, tmp_path) -> int:
    raw = saver.raw
    if saver.backend.name.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(str(tmp_path / "state.db"))
        try:
            q = "SELECT count(*) FROM v_checkpoints WHERE thread_id = ?"
            return conn.execute(q, (thread,)).fetchone()[0]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(raw.connector.url, autocommit=True) as conn:
        q = f'SELECT count(*) FROM "{raw.sql.schema}".checkpoints WHERE thread_id = %s'
        return conn.execute(q, (thread,)).fetchone()[0]


async def test_postgres_locks_per_transaction_are_bounded(saver) -> None:
    """Each thread's advisory lock lasts to the end of its transaction: 25,000 ids
    in one ran out of max_locks_per_transaction (even ids with no rows)."""
    if not saver.backend.name.startswith("postgres"):
        pytest.skip("Postgres advisory locks")
    raw = saver.raw
    names = [f"none{i}" for i in range(400)]
    held: list[int] = []
    ex = raw.executor

    def count() -> int:
        import psycopg

        with psycopg.connect(raw.connector.url, autocommit=True) as conn:
            q = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            return conn.execute(q).fetchone()[0]

    inner = ex.execute

    def look(op):
        if type(op) is ops.ListCheckpoints and op.thread_id == names[-1]:
            held.append(count())
        return inner(op)

    ainner = getattr(ex, "aexecute", None)

    async def alook(op):
        if type(op) is ops.ListCheckpoints and op.thread_id == names[-1]:
            held.append(count())
        return await ainner(op)

    ex.execute = look
    if ainner is not None:
        ex.aexecute = alook
    try:
        report = await saver.prune(names, strategy="delete")
    finally:
        del ex.execute
        if ainner is not None:
            del ex.aexecute
    assert report.checkpoints == 0
    assert held and held[-1] <= batching.MAX_THREADS + 20  # others' tests may hold a few

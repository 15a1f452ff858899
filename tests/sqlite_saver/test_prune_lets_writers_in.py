"""A big prune on SQLite lets another process's writer in between its steps.

Steps alone were not enough: SQLite's busy handler polls (every 100 ms after a
while) and the next step took the lock again microseconds after the last
commit, so a writer waited 2-10 s behind a 20 s prune. SqliteSaver rests as
long as each step took (``retention_pause``, storage/batching.py)."""

from __future__ import annotations

import sqlite3
import threading
import time

from tests.savers.api import Api
from tests.savers.test_retention import grow
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.storage import batching, ops


async def test_writer_gets_in_before_the_last_step(tmp_path, monkeypatch) -> None:
    path = str(tmp_path / "state.db")
    monkeypatch.setattr(batching, "MAX_THREADS", 2)
    names = [f"t{i}" for i in range(12)]
    with SqliteSaver.from_conn_string(path) as raw:
        saver = Api(raw, "sync", None)
        for name in names:
            await grow(saver, 2, name)
        side = sqlite3.connect(path, timeout=30, check_same_thread=False)
        side.execute("CREATE TABLE other_app (x)")
        side.commit()
        steps: list[float] = []  # when each step's first delete ran
        wrote: list[float] = []

        def writer() -> None:
            side.execute("BEGIN IMMEDIATE")  # waits on the prune's write lock
            side.execute("INSERT INTO other_app VALUES (1)")
            side.commit()
            wrote.append(time.monotonic())

        started = threading.Thread(target=writer)
        inner = raw.executor.execute

        def slow(op):
            if type(op) is ops.DeleteCheckpoints:
                if int(op.thread_id[1:]) % 2 == 0:
                    steps.append(time.monotonic())
                if op.thread_id == "t0":
                    started.start()
                time.sleep(0.04)  # each step holds the lock ~80 ms
            return inner(op)

        monkeypatch.setattr(raw.executor, "execute", slow)
        report = raw.prune(names, strategy="keep_latest")
        started.join(30)
        side.close()
    assert report.checkpoints == 12
    assert len(steps) == 6 and wrote
    assert wrote[0] < steps[-1]  # in before the last step, not after the whole prune


def _rests(monkeypatch) -> list[float]:
    """The rests a sync plan takes between steps (storage/batching.py)."""
    rests: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(batching.time, "sleep", lambda s: (rests.append(s), sleep(s)))
    return rests


async def test_no_rest_on_an_in_memory_database(tmp_path, monkeypatch) -> None:
    """No other process can wait on an in-memory database's lock, and this
    process's threads wait on the saver's own lock, which a rest does not hand
    over: the rest only made the prune slower (4,000 threads: 4.2 s vs 2.1 s)."""
    monkeypatch.setattr(batching, "MAX_THREADS", 2)
    names = [f"t{i}" for i in range(6)]
    rests = _rests(monkeypatch)
    with SqliteSaver.from_conn_string(":memory:") as raw:
        for name in names:
            await grow(Api(raw, "sync", None), 2, name)
        assert raw.retention_pause == 0.0
        assert raw.prune(names, strategy="keep_latest").checkpoints == 6
    assert rests == []
    with SqliteSaver.from_conn_string(str(tmp_path / "state.db")) as raw:
        for name in names:
            await grow(Api(raw, "sync", None), 2, name)
        assert raw.retention_pause == 1.0
        assert raw.prune(names, strategy="keep_latest").checkpoints == 6
    assert len(rests) == 2  # between the 3 steps


async def test_a_pause_set_before_setup_is_kept(tmp_path) -> None:
    """``retention_pause = 0`` on a file only this process writes: set on the
    saver, it is not overridden (nor 1.0 set on an in-memory one)."""
    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    raw = SqliteSaver(conn)
    raw.retention_pause = 1.0
    raw.setup()
    assert raw.retention_pause == 1.0
    conn.close()
    async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
        assert saver.retention_pause == 0.0
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        assert saver.retention_pause == 1.0

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

"""Durability "async" on the sync driver: ``flush()`` saves what the pool thread
has not taken yet on the calling thread (no hand-over at exit), in order, and
waits for a batch the pool thread is saving before it saves the rest."""

from __future__ import annotations

import threading

import pytest

from threadloom.pregel import pool
from threadloom.pregel.persist import SyncPersister


class _Recorder:
    """A saver with put_step/put_steps that records (thread, checkpoint ids)."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls: list[tuple[int, list[str]]] = []
        self.gate = gate
        self.started = threading.Event()

    def put_step(self, writes, checkpoint=None):
        return self.put_steps([(writes, checkpoint)])

    def put_steps(self, steps):
        self.started.set()
        if self.gate is not None and not self.calls:
            self.gate.wait(5)
        ids = [cp[1]["id"] for _, cp in steps if cp is not None]
        self.calls.append((threading.get_ident(), ids))

    def put(self, config, checkpoint, metadata, new_versions):
        raise AssertionError("put_step is used")

    def put_writes(self, config, writes, task_id, task_path=""):
        raise AssertionError("put_step is used")


def _put(p: SyncPersister, i: int) -> None:
    p.put({}, {"id": f"cp{i}"}, {}, {})


def test_flush_saves_what_the_pool_has_not_taken_on_the_calling_thread(monkeypatch) -> None:
    jobs = []
    monkeypatch.setattr(pool.POOL, "spawn", lambda fn: jobs.append(fn))
    saver = _Recorder()
    p = SyncPersister(saver, "async")
    for i in range(3):
        _put(p, i)
    assert len(jobs) == 1 and saver.calls == []  # queued, the pool job not run yet
    p.flush()
    assert saver.calls == [(threading.get_ident(), ["cp0", "cp1", "cp2"])]  # one put_steps
    jobs[0]()  # the pool job runs late: nothing left to save
    assert len(saver.calls) == 1
    _put(p, 3)  # a later save is taken by a new job
    assert len(jobs) == 2
    jobs[1]()
    assert saver.calls[-1][1] == ["cp3"]


def test_flush_waits_for_the_batch_the_pool_thread_is_saving() -> None:
    gate = threading.Event()
    saver = _Recorder(gate)
    p = SyncPersister(saver, "async")
    _put(p, 0)
    assert saver.started.wait(5)  # the pool thread holds the first batch
    _put(p, 1)
    _put(p, 2)
    done = threading.Event()

    def flush() -> None:
        p.flush()
        done.set()

    flusher = threading.Thread(target=flush)
    flusher.start()
    assert not done.wait(0.05)  # flush waits for the batch in progress
    gate.set()
    flusher.join(5)
    assert done.is_set()
    assert [ids for _, ids in saver.calls] == [["cp0"], ["cp1", "cp2"]]  # in order


def test_flush_raises_the_first_failure_of_its_own_batch(monkeypatch) -> None:
    monkeypatch.setattr(pool.POOL, "spawn", lambda fn: None)

    class _Failing(_Recorder):
        def put_steps(self, steps):
            raise OSError("disk full")

    p = SyncPersister(_Failing(), "async")
    _put(p, 0)
    with pytest.raises(OSError, match="disk full"):
        p.flush()
    p.flush()  # reported once; the queue is empty


class _Interrupted(_Recorder):
    """Ctrl-C lands in the first save made on the run's own thread."""

    def __init__(self) -> None:
        super().__init__()
        self.main = threading.get_ident()
        self.interrupted = False

    def put_steps(self, steps):
        if not self.interrupted and threading.get_ident() == self.main:
            self.interrupted = True
            raise KeyboardInterrupt
        super().put_steps(steps)


def test_ctrl_c_in_flush_leaves_the_batch_to_the_pool_thread(monkeypatch) -> None:
    """A KeyboardInterrupt during the caller-side save neither drops the batch
    nor leaves the queue marked busy (found in review: the pool job then waited
    forever and any later flush hung)."""
    jobs = []
    monkeypatch.setattr(pool.POOL, "spawn", lambda fn: jobs.append(fn))
    saver = _Interrupted()
    p = SyncPersister(saver, "async")
    for i in range(2):
        _put(p, i)
    with pytest.raises(KeyboardInterrupt):
        p.flush()
    worker = threading.Thread(target=jobs[0])  # the pool job saves the kept batch
    worker.start()
    worker.join(5)
    assert not worker.is_alive()
    assert [ids for _, ids in saver.calls] == [["cp0", "cp1"]]
    p.flush()  # nothing left, returns at once

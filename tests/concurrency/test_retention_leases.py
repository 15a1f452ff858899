"""Retention vs leases: delete_thread / prune / copy_thread (target) / delete_for_runs
refuse a thread whose lease a run holds (ThreadBusyError naming the holder, nothing
changed) unless force=True; free threads and dry runs are unaffected."""

from __future__ import annotations

import threading

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from threadloom.checkpoint.lease.lease import Lease
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.errors import ThreadBusyError


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    return make_spec(request.param, str(tmp_path), request)


def _cfg(thread: str, run_id: str = "run-1") -> dict:
    return {"configurable": {"thread_id": thread, "run_id": run_id}}


def _ids(saver, thread: str) -> list[str]:
    return [c.checkpoint["id"] for c in saver.list({"configurable": {"thread_id": thread}})]


def _operations(saver):
    """Each guarded operation on thread 'busy' (copy: into 'busy' as the target)."""
    return {
        "delete_thread": lambda **kw: saver.delete_thread("busy", **kw),
        "prune": lambda **kw: saver.prune(["free", "busy"], strategy="keep_latest", **kw),
        "copy_thread": lambda **kw: saver.copy_thread("free", "busy", **kw),
        "delete_for_runs": lambda **kw: saver.delete_for_runs(["run-busy"], **kw),
    }


def _fill(saver) -> None:
    graph = chain(3).compile(checkpointer=saver)
    graph.invoke({"log": []}, _cfg("busy", "run-busy"))
    graph.invoke({"log": []}, _cfg("free", "run-free"))


@pytest.mark.parametrize("op", ["delete_thread", "prune", "copy_thread", "delete_for_runs"])
def test_held_thread_is_refused_and_untouched_until_forced(spec, op):
    with open_saver(spec) as saver:
        _fill(saver)
        busy, free = _ids(saver, "busy"), _ids(saver, "free")
        lease = Lease(saver, "busy", "run-A", ttl=30)
        assert lease.try_acquire() is None
        run = _operations(saver)[op]
        with pytest.raises(ThreadBusyError) as err:
            run()
        assert err.value.thread_id == "busy" and err.value.holder == "run-A"
        assert "run-A" in str(err.value) and "force=True" in str(err.value)
        assert _ids(saver, "busy") == busy and _ids(saver, "free") == free  # nothing changed
        run(force=True)
        assert _ids(saver, "busy") != busy
        lease.release()


def test_free_thread_and_dry_run_are_not_refused(spec):
    with open_saver(spec) as saver:
        _fill(saver)
        lease = Lease(saver, "busy", "run-A", ttl=30)
        assert lease.try_acquire() is None
        report = saver.prune(["busy"], strategy="keep_latest", dry_run=True)
        assert report.dry_run and report.checkpoints > 0
        saver.copy_thread("busy", "copy")  # a running source may be read (like get_state)
        assert len(_ids(saver, "copy")) == len(_ids(saver, "busy"))
        saver.delete_thread("free")
        assert _ids(saver, "free") == []
        lease.release()
        saver.delete_thread("busy")  # released: no longer refused
        assert _ids(saver, "busy") == []


def test_delete_during_a_real_run_is_refused(tmp_path):
    gate, started = threading.Event(), threading.Event()
    with SqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
        graph = chain(2, gate, started).compile(checkpointer=saver)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                graph.invoke({"log": []}, _cfg("t", "run-live"))
            except BaseException as exc:  # reported below
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert started.wait(10)
        with pytest.raises(ThreadBusyError, match="run-live"):
            saver.delete_thread("t")
        gate.set()
        worker.join(20)
        assert not errors
        assert graph.get_state(_cfg("t")).values == {"log": ["s0", "s1"]}


async def test_async_memory_refuses_until_forced():
    saver = InMemorySaver()
    _fill(saver)
    lease = Lease(saver, "busy", "run-A", ttl=30)
    assert lease.try_acquire() is None
    with pytest.raises(ThreadBusyError, match="run-A"):
        await saver.adelete_thread("busy")
    with pytest.raises(ThreadBusyError):
        await saver.aprune(["busy"], strategy="delete")
    with pytest.raises(ThreadBusyError):
        await saver.acopy_thread("free", "busy")
    with pytest.raises(ThreadBusyError):
        await saver.adelete_for_runs(["run-busy"])
    assert len(_ids(saver, "busy")) == 5
    await saver.adelete_thread("busy", force=True)
    assert _ids(saver, "busy") == []


async def test_async_sqlite_refuses_until_forced(tmp_path):
    path = str(tmp_path / "a.db")
    with SqliteSaver.from_conn_string(path) as sync:
        _fill(sync)
        lease = Lease(sync, "busy", "run-A", ttl=30)
        assert lease.try_acquire() is None
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            with pytest.raises(ThreadBusyError, match="run-A"):
                await saver.adelete_thread("busy")
            with pytest.raises(ThreadBusyError):
                await saver.aprune(["busy"], strategy="delete")
            with pytest.raises(ThreadBusyError):
                await saver.acopy_thread("free", "busy")
            with pytest.raises(ThreadBusyError):
                await saver.adelete_for_runs(["run-busy"])
            await saver.aprune(["busy"], strategy="delete", force=True)
        assert _ids(sync, "busy") == []
        lease.release()

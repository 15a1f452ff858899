"""Retention vs a run acquiring the lease *during* it: once retention's lease check
passed, a run that tries to take the lease is refused (ThreadBusyError) or waits
until retention committed; either way it never reads a half-deleted thread, only
the finished result. One test per backend and guarded operation."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from threadloom.checkpoint.lease.lease import Lease
from threadloom.checkpoint.storage import retention

OPS = ["delete_thread", "prune", "copy_thread", "delete_for_runs"]


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    return make_spec(request.param, str(tmp_path), request)


@contextmanager
def _two_savers(spec):
    """Retention's saver and the run's (its own connection, like another process)."""
    with open_saver(spec) as saver:
        if spec["kind"] == "memory":
            yield saver, saver
        else:
            with open_saver(spec) as other:
                yield saver, other


def _ids(saver, thread: str) -> list[str]:
    return [c.checkpoint["id"] for c in saver.list({"configurable": {"thread_id": thread}})]


def _run_op(saver, op: str) -> None:
    {
        "delete_thread": lambda: saver.delete_thread("busy"),
        "prune": lambda: saver.prune(["busy"], strategy="keep_latest"),
        "copy_thread": lambda: saver.copy_thread("free", "busy"),
        "delete_for_runs": lambda: saver.delete_for_runs(["run-busy"]),
    }[op]()


def _pause_after_guard(monkeypatch, checked: threading.Event, resume: threading.Event) -> None:
    """Retention stops right after its lease check passed, until ``resume``."""
    original = retention.guard_flow

    def paused(*args, **kwargs):
        result = yield from original(*args, **kwargs)
        checked.set()
        assert resume.wait(20)
        return result

    monkeypatch.setattr(retention, "guard_flow", paused)


def _in_thread(target, errors: list[BaseException]) -> threading.Thread:
    def body() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    return worker


@pytest.mark.parametrize("op", OPS)
def test_run_acquiring_during_retention_sees_only_the_finished_result(spec, op, monkeypatch):
    with _two_savers(spec) as (saver, other):
        graph = chain(3).compile(checkpointer=saver)
        graph.invoke({"log": []}, {"configurable": {"thread_id": "busy", "run_id": "run-busy"}})
        graph.invoke({"log": []}, {"configurable": {"thread_id": "free", "run_id": "run-free"}})
        before = _ids(saver, "busy")
        checked, resume = threading.Event(), threading.Event()
        _pause_after_guard(monkeypatch, checked, resume)
        errors: list[BaseException] = []
        seen: list[object] = []  # what the run saw: a refusal's holder, or the thread

        def run() -> None:
            lease = Lease(other, "busy", "run-B", ttl=30)
            info = lease.try_acquire()
            if info is not None:
                seen.append(("refused", info.holder))
                return
            seen.append(("read", _ids(other, "busy")))
            lease.release()

        worker = _in_thread(lambda: _run_op(saver, op), errors)
        assert checked.wait(20)
        runner = _in_thread(run, errors)
        runner.join(0.5)  # room for an unguarded acquire to slip in and read
        resume.set()
        worker.join(20)
        runner.join(20)
        assert not errors and not worker.is_alive() and not runner.is_alive()
        after = _ids(saver, "busy")
        assert after != before
        kind, what = seen[0]
        if kind == "refused":  # retention held the lease: the run may retry later
            assert "retention" in str(what)
            lease = Lease(other, "busy", "run-B", ttl=30)
            assert lease.try_acquire() is None
            what = _ids(other, "busy")
            lease.release()
        assert what == after

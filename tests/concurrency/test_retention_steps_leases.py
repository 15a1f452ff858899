"""Retention in steps (storage/batching.py) keeps the lease rules: a thread a run
holds when the call starts is refused before anything is written; a run that
takes a lease while the call is under way stops it at that thread's step, the
steps before it committed, that thread and the ones after it untouched."""

from __future__ import annotations

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from threadloom.checkpoint.lease.lease import Lease
from threadloom.checkpoint.storage import batching
from threadloom.errors import ThreadBusyError

NAMES = [f"t{i}" for i in range(6)]


@pytest.fixture(params=KINDS)
def spec(request, tmp_path, monkeypatch):
    monkeypatch.setattr(batching, "MAX_THREADS", 2)
    return make_spec(request.param, str(tmp_path), request)


def _ids(saver, thread: str) -> list[str]:
    return [c.checkpoint["id"] for c in saver.list({"configurable": {"thread_id": thread}})]


def _fill(saver) -> None:
    graph = chain(3).compile(checkpointer=saver)
    for name in NAMES:
        graph.invoke({"log": []}, {"configurable": {"thread_id": name, "run_id": "r"}})


@pytest.mark.parametrize("op", ["prune", "delete_for_runs"])
def test_held_last_thread_refuses_the_whole_call(spec, op):
    with open_saver(spec) as saver:
        _fill(saver)
        before = {n: _ids(saver, n) for n in NAMES}
        lease = Lease(saver, NAMES[-1], "run-A", ttl=30)
        assert lease.try_acquire() is None
        with pytest.raises(ThreadBusyError):
            if op == "prune":
                saver.prune(NAMES, strategy="keep_latest")
            else:
                saver.delete_for_runs(["r"])
        assert {n: _ids(saver, n) for n in NAMES} == before  # no step was written
        lease.release()


def test_lease_taken_mid_call_stops_at_its_step(spec, monkeypatch):
    with open_saver(spec) as saver:
        _fill(saver)
        before = {n: _ids(saver, n) for n in NAMES}
        lease = Lease(saver, "t3", "run-A", ttl=30)
        run, steps = saver._run, [0]

        def racing(flow, write=False):
            if write:
                steps[0] += 1
                if steps[0] == 2:  # after the first step (t0, t1) committed
                    assert lease.try_acquire() is None
            return run(flow, write)

        monkeypatch.setattr(saver, "_run", racing)
        with pytest.raises(ThreadBusyError) as err:
            saver.prune(NAMES, strategy="keep_latest")
        assert err.value.thread_id == "t3"
        assert [len(_ids(saver, n)) for n in NAMES[:2]] == [1, 1]
        assert {n: _ids(saver, n) for n in NAMES[2:]} == {n: before[n] for n in NAMES[2:]}
        lease.release()

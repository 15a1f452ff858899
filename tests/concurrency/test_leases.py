"""Thread leases on every backend: exclusion, expiry, fencing (a writer that lost its
lease writes nothing), renewal through long steps."""

from __future__ import annotations

import time

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from threadloom.checkpoint.ids import uuid6_str
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import FencedSaver, Lease, lease_backend
from threadloom.errors import LeaseLostError, ThreadBusyError


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    return make_spec(request.param, str(tmp_path), request)


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def test_second_acquire_is_refused_until_release(spec):
    with open_saver(spec) as saver:
        assert lease_backend(saver) == spec["kind"]
        a = Lease(saver, "t1", "run-a", ttl=30)
        b = Lease(saver, "t1", "run-b", ttl=30)
        assert a.try_acquire() is None
        busy = b.try_acquire()
        assert busy is not None and busy.holder == "run-a"
        assert Lease(saver, "t2", "run-c").try_acquire() is None  # other threads are free
        a.release()
        assert b.try_acquire() is None
        info = saver._run(lo.read_flow("t1"), True)
        assert info.holder == "run-b" and info.expires_in_ms > 0


def test_expired_lease_is_taken_over_and_the_old_writer_is_fenced(spec):
    with open_saver(spec) as saver:
        lease_backend(saver)
        graph = chain(2).compile(checkpointer=saver)
        graph.invoke({"log": []}, _cfg("t"))
        before = [c.checkpoint["id"] for c in saver.list(_cfg("t"))]

        old = Lease(saver, "t", "old-run", ttl=0.2)
        assert old.try_acquire() is None
        stale = FencedSaver(saver, old)
        latest = saver.get_tuple(_cfg("t"))
        time.sleep(0.35)  # expired: a crashed or paused holder
        new = Lease(saver, "t", "new-run", ttl=30)
        assert new.try_acquire() is None

        with pytest.raises(LeaseLostError) as err:
            stale.put(latest.config, dict(latest.checkpoint, id=uuid6_str()), {"step": 99}, {})
        assert err.value.thread_id == "t"
        with pytest.raises(LeaseLostError):
            stale.put_writes(latest.config, [("log", ["zombie"])], "task-x")
        after = saver.get_tuple(_cfg("t"))
        assert [c.checkpoint["id"] for c in saver.list(_cfg("t"))] == before
        assert not any(w[0] == "task-x" for w in after.pending_writes or [])
        new.release()


def test_renewal_keeps_a_long_step_alive(spec, monkeypatch):
    """A step longer than the TTL keeps its lease. Renewals are counted instead
    of sleeping a fixed time: four (one per TTL/3) put the run past its TTL for
    sure, and the busy check runs right after one, with most of a TTL left (a
    0.8 s sleep over a 0.3 s TTL failed whenever the shared renewer thread was
    held up for 0.2 s on a loaded box)."""
    import threading

    renewed: list[bool] = []
    real_renew = Lease.renew

    def counted(self: Lease) -> None:
        real_renew(self)
        if self.thread_id == "r":
            renewed.append(self.lost)

    monkeypatch.setattr(Lease, "renew", counted)
    with open_saver(spec) as saver:
        saver.lease_ttl = 1.2
        gate, started = threading.Event(), threading.Event()
        graph = chain(2, gate, started).compile(checkpointer=saver)
        results: list = []
        t = threading.Thread(target=lambda: results.append(graph.invoke({"log": []}, _cfg("r"))))
        t.start()
        try:
            assert started.wait(20)
            deadline = time.monotonic() + 30
            while len(renewed) < 4:  # 4 x TTL/3 since the acquire: past the TTL
                assert time.monotonic() < deadline, renewed
                time.sleep(0.005)
            assert not any(renewed)  # never lost
            with pytest.raises(ThreadBusyError):
                graph.invoke({"log": []}, _cfg("r"))
        finally:
            gate.set()
            t.join(20)
        assert results == [{"log": ["s0", "s1"]}]


def test_sequential_runs_subgraphs_and_state_api_need_no_strategy(spec):
    from tests.concurrency.graphs import ChainState
    from threadloom.graph import START, StateGraph

    with open_saver(spec) as saver:
        inner = chain(2).compile()
        outer = StateGraph(ChainState)
        outer.add_node("sub", inner)
        outer.add_edge(START, "sub")
        graph = outer.compile(checkpointer=saver)
        cfg, plain = _cfg("s"), _cfg("s-unleased")
        for turn in ("a", "b"):  # same results as without leases
            assert graph.invoke({"log": [turn]}, cfg) == graph.invoke(
                {"log": [turn]}, plain, lease=False
            )
        assert graph.get_state(cfg).values["log"][-2:] == ["s0", "s1"]
        graph.update_state(cfg, {"log": ["manual"]})
        assert graph.get_state(cfg).values["log"][-1] == "manual"
        assert saver._run(lo.read_flow("s"), True) is None  # released

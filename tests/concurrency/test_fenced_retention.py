"""Retention through a run's FencedSaver (threadloom/checkpoint/lease/passthrough.py).

BaseCheckpointSaver defines delete_thread/prune/copy_thread/delete_for_runs/stats/close
(and the async twins), so FencedSaver.__getattr__ never saw them: each raised
NotImplementedError. Now they are forwarded; writing the leased thread is fenced
like a checkpoint write (allowed while the run holds the lease, LeaseLostError and
nothing changed once lost), other threads keep the ThreadBusyError guard, and each
call drops the checkpoint read when the lease was taken (``lease.first``).
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from tests.concurrency.test_async_savers import _open
from threadloom.checkpoint.lease import lease as _lease
from threadloom.checkpoint.lease.lease import FencedSaver, Lease
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import LeaseLostError, ThreadBusyError

# each operation writing thread "mine" (copy: into it), as (args, kwargs)
OPS = {
    "delete_thread": (("mine",), {}),
    "prune": ((["mine"],), {"strategy": "keep_latest"}),
    "copy_thread": (("other", "mine"), {}),
    "delete_for_runs": ((["run-mine"],), {}),
}
PREFETCHED = object()  # stands for the checkpoint read when the lease was taken


def _cfg(thread: str, run_id: str) -> dict:
    return {"configurable": {"thread_id": thread, "run_id": run_id}}


def _ids(saver, thread: str) -> list[str]:
    return [c.checkpoint["id"] for c in saver.list({"configurable": {"thread_id": thread}})]


async def _aids(saver, thread: str) -> list[str]:
    cfg = {"configurable": {"thread_id": thread}}
    return [c.checkpoint["id"] async for c in saver.alist(cfg)]


def _fill(saver) -> None:
    graph = chain(3).compile(checkpointer=saver)
    graph.invoke({"log": []}, _cfg("mine", "run-mine"))
    graph.invoke({"log": []}, _cfg("other", "run-other"))


async def _afill(saver) -> None:
    graph = chain(3).compile(checkpointer=saver)
    await graph.ainvoke({"log": []}, _cfg("mine", "run-mine"))
    await graph.ainvoke({"log": []}, _cfg("other", "run-other"))


def _fenced(saver, holder: str = "run-A") -> FencedSaver:
    lease = Lease(saver, "mine", holder, ttl=30)
    assert lease.try_acquire() is None
    lease.first = PREFETCHED
    return FencedSaver(saver, lease)


def _steal(fenced: FencedSaver) -> Lease:
    """Another run takes the thread over: ``fenced``'s lease is lost."""
    fenced.lease.release()
    thief = Lease(fenced.inner, "mine", "run-B", ttl=30)
    assert thief.try_acquire() is None
    return thief


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    return make_spec(request.param, str(tmp_path), request)


@pytest.mark.parametrize("op", list(OPS))
def test_own_thread_while_held(spec, op):
    with open_saver(spec) as saver:
        _fill(saver)
        before, other = _ids(saver, "mine"), _ids(saver, "other")
        fenced = _fenced(saver)
        args, kwargs = OPS[op]
        getattr(fenced, op)(*args, **kwargs)  # not "busy" against its own run
        assert _ids(saver, "mine") != before and _ids(saver, "other") == other
        assert fenced.lease.first is _lease.NOT_READ and not fenced.lease.lost
        fenced.lease.release()


@pytest.mark.parametrize("op", list(OPS))
def test_own_thread_once_lost_is_refused(spec, op):
    with open_saver(spec) as saver:
        _fill(saver)
        before, other = _ids(saver, "mine"), _ids(saver, "other")
        fenced = _fenced(saver)
        thief = _steal(fenced)
        args, kwargs = OPS[op]
        for force in (False, True):  # force overrides other holders, never the fence
            with pytest.raises(LeaseLostError) as err:
                getattr(fenced, op)(*args, force=force, **kwargs)
            assert err.value.thread_id == "mine"
        assert _ids(saver, "mine") == before and _ids(saver, "other") == other
        assert fenced.lease.lost and fenced.lease.first is _lease.NOT_READ
        thief.release()


def test_other_threads_keep_the_guard(spec):
    with open_saver(spec) as saver:
        _fill(saver)
        mine, other = _ids(saver, "mine"), _ids(saver, "other")
        fenced = _fenced(saver)
        held = Lease(saver, "other", "run-B", ttl=30)
        assert held.try_acquire() is None
        with pytest.raises(ThreadBusyError) as err:
            fenced.prune(["mine", "other"])
        assert err.value.thread_id == "other" and err.value.holder == "run-B"
        with pytest.raises(ThreadBusyError):
            fenced.delete_thread("other")
        assert _ids(saver, "mine") == mine and _ids(saver, "other") == other
        report = fenced.prune(["mine", "other"], dry_run=True)
        assert report.dry_run and report.checkpoints == len(mine) + len(other) - 2
        assert fenced.prune(["mine", "other"], force=True).checkpoints == report.checkpoints
        assert len(_ids(saver, "mine")) == 1 and len(_ids(saver, "other")) == 1
        fenced.copy_thread("mine", "copy")  # reading the leased thread: not fenced
        assert _ids(saver, "copy") == _ids(saver, "mine")
        assert not fenced.lease.lost
        held.release()
        fenced.lease.release()


def test_stats_pass_through_and_close_leaves_the_shared_saver_open():
    saver = InMemorySaver()
    _fill(saver)
    fenced = _fenced(saver)
    assert fenced.stats() == saver.stats() and fenced.stats("mine") == saver.stats("mine")
    assert fenced.stats("mine")["checkpoints"] == len(_ids(saver, "mine"))
    closed: list[str] = []
    saver.close = lambda: closed.append("close")  # type: ignore[method-assign]
    with fenced:  # a run's wrapper used as a context manager
        pass
    fenced.close()
    assert closed == []  # every other run still saves through it
    assert fenced.stats("mine")["checkpoints"] == len(_ids(saver, "mine"))


async def test_aclose_leaves_the_shared_saver_open():
    saver = InMemorySaver()
    _fill(saver)
    fenced = _fenced(saver)
    closed: list[str] = []

    async def aclose() -> None:
        closed.append("aclose")

    saver.aclose = aclose  # type: ignore[method-assign]
    await fenced.aclose()
    assert closed == []
    fenced.lease.release()


# -- async twins --------------------------------------------------------------------


@asynccontextmanager
async def _aopen(kind, tmp_path, request):
    if kind == "memory":
        yield InMemorySaver()
    else:
        async with _open(kind, tmp_path, request) as saver:
            yield saver


async def _afenced(saver, holder: str = "run-A") -> FencedSaver:
    lease = Lease(saver, "mine", holder, ttl=30)
    assert await lease.atry_acquire() is None
    lease.first = PREFETCHED
    return FencedSaver(saver, lease)


@pytest.mark.parametrize("kind", KINDS)
async def test_async_twins(kind, tmp_path, request):
    async with _aopen(kind, tmp_path, request) as saver:
        await _afill(saver)
        for op, (args, kwargs) in OPS.items():
            await _afill(saver)  # history again for each operation
            before, other = await _aids(saver, "mine"), await _aids(saver, "other")
            fenced = await _afenced(saver)
            await getattr(fenced, "a" + op)(*args, **kwargs)
            assert await _aids(saver, "mine") != before, op
            assert fenced.lease.first is _lease.NOT_READ and not fenced.lease.lost
            await fenced.lease.arelease()
            await _afill(saver)  # something to refuse (delete_for_runs finds run-mine's)
            before, other = await _aids(saver, "mine"), await _aids(saver, "other")
            fenced = await _afenced(saver)
            await fenced.lease.arelease()
            thief = Lease(saver, "mine", "run-B", ttl=30)
            assert await thief.atry_acquire() is None
            with pytest.raises(LeaseLostError, match="mine"):
                await getattr(fenced, "a" + op)(*args, **kwargs)
            assert await _aids(saver, "mine") == before and await _aids(saver, "other") == other
            assert fenced.lease.lost
            await thief.arelease()
        assert (await fenced.astats("mine")) == (await saver.astats("mine"))


@pytest.mark.parametrize("target", ["mine", "other"])
async def test_prune_given_a_generator_prunes(target):
    """Review finding (session 8): deciding whether the run's own thread was among
    the ids read the generator, so the inner saver got none and pruned nothing."""
    for asynchronous in (False, True):
        saver = InMemorySaver()
        _fill(saver)
        fenced = _fenced(saver)
        ids = (t for t in [target])
        if asynchronous:
            await fenced.aprune(ids, strategy="keep_latest")
        else:
            fenced.prune(ids, strategy="keep_latest")
        assert len(_ids(saver, target)) == 1, asynchronous

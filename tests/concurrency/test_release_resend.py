"""A releasing save sent again after it committed (an async run cancelled while
its last save was in flight, then flushed at exit): the second send finds the
lease gone because the first released it. The run must report its
cancellation, not ``LeaseLostError`` ("nothing was written"), and nothing is
lost or stored twice (threadloom/checkpoint/lease/resend.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.concurrency.backends import KINDS, make_spec, open_saver
from tests.concurrency.graphs import chain
from tests.concurrency.test_async_savers import _open
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import uuid6
from threadloom.checkpoint.lease import lease as lease_mod
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import LeaseLostError


@pytest.fixture
def cancel_after_commit(monkeypatch):
    """The first releasing ``aput_steps`` commits, then its caller is cancelled."""
    real = lease_mod.FencedSaver.aput_steps
    hits: list[int] = []

    async def flaky(self: Any, steps: Any, release: bool = False) -> Any:
        out = await real(self, steps, release)
        if release and not hits:
            hits.append(1)
            raise asyncio.CancelledError
        return out

    monkeypatch.setattr(lease_mod.FencedSaver, "aput_steps", flaky)
    return hits


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("durability", ["sync", "exit"])
async def test_cancelled_after_release_committed(
    kind, durability, cancel_after_commit, tmp_path, request
):
    async with _saver(kind, tmp_path, request) as saver:
        graph = chain(3).compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "t"}}
        with pytest.raises(asyncio.CancelledError):
            await graph.ainvoke({"log": []}, cfg, durability=durability)
        assert cancel_after_commit == [1]
        state = await graph.aget_state(cfg)
        assert state.values == {"log": ["s0", "s1", "s2"]} and state.next == ()
        history = [s async for s in graph.aget_state_history(cfg)]
        assert len(history) == len({s.config["configurable"]["checkpoint_id"] for s in history})
        # the thread is free: the release committed with the last checkpoint
        out = await graph.ainvoke({"log": []}, cfg, durability=durability)
        assert out["log"] == ["s0", "s1", "s2"] * 2


def _saver(kind: str, tmp_path: Any, request: Any) -> Any:
    if kind == "memory":
        return _memory()
    return _open(kind, tmp_path, request)


class _memory:
    async def __aenter__(self) -> InMemorySaver:
        return InMemorySaver()

    async def __aexit__(self, *exc: Any) -> None:
        return None


def _step(thread: str) -> list[Any]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return [((), (config, checkpoint, {"source": "loop", "step": 0}, {}))]


@pytest.mark.parametrize("kind", KINDS)
def test_put_steps_resent_after_its_release(kind, tmp_path, request):
    spec = make_spec(kind, str(tmp_path), request)
    with open_saver(spec) as saver:
        lease = lease_mod.Lease(saver, "t", "holder")
        assert lease.try_acquire() is None
        fenced = lease_mod.FencedSaver(saver, lease)
        steps = _step("t")
        first = fenced.put_steps(steps, release=True)
        assert saver._run(lo.read_flow("t"), True) is None  # released
        again = fenced.put_steps(steps, release=True)  # the re-send: already stored
        assert again["configurable"]["checkpoint_id"] == first["configurable"]["checkpoint_id"]
        assert lease.released and not lease.lost
        assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 1
        # a save that never committed still reports the lost lease
        with pytest.raises(LeaseLostError):
            fenced.put_steps(_step("t"), release=True)

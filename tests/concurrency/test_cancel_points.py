"""The other async savers under a cancel at each suspension point of a run
(the Postgres cases, with the acquire's commit cut off, are in
test_pg_cancel_points.py): the thread is free when the cancel reaches the
caller, and finishing the run stores each step once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.concurrency.cancelpoints import cancel_each_point, settle
from tests.concurrency.graphs import chain
from tests.concurrency.test_release_resend import _saver
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import Lease


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
@pytest.mark.parametrize("durability", ["sync", "exit"])
async def test_a_cancelled_ainvoke_frees_the_thread_and_stores_each_step_once(
    kind, durability, tmp_path, request
):
    async with _saver(kind, tmp_path, request) as saver:
        graph = chain(3).compile(checkpointer=saver)

        async def check(n: int, cfg: dict[str, Any]) -> None:
            # (Redis: redis-py's asyncio.wait_for swallows a cancel landing as a
            # send completes on Python < 3.12; the async saver raises it again)
            assert await saver._arun(lo.read_flow(f"t{n}"), False) is None, n
            other = Lease(saver, f"t{n}", "run-B", 60.0)
            assert await other.atry_acquire() is None, n  # free at once
            await other.arelease()
            assert await settle(graph, cfg, durability) == ["s0", "s1", "s2"], n

        assert await cancel_each_point(graph, durability, check) >= 2


async def test_a_halted_renewal_stops_even_when_its_cancel_was_swallowed():
    """Review finding (session 7): the renewal loop checked only ``lost``; its
    task's cancel can be swallowed (redis-py's wait_for on Python < 3.12), and
    it then renewed every TTL/3 until the event loop ended."""
    import asyncio

    from threadloom.checkpoint.memory import InMemorySaver

    lease = Lease(InMemorySaver(), "t", "run-A", 0.03)  # renew every 10 ms
    assert await lease.atry_acquire() is None
    renewals = 0
    renew = lease.arenew

    async def counted() -> Any:
        nonlocal renewals
        renewals += 1
        return await renew()

    lease.arenew = counted  # type: ignore[method-assign]
    lease.astart_renewal()
    task = lease._task
    await asyncio.sleep(0.05)
    assert renewals > 0
    lease.halted = True  # what ahalt does, minus the cancel (as if swallowed)
    await asyncio.wait_for(task, 1.0)  # the loop ends on its own
    seen = renewals
    await asyncio.sleep(0.05)
    assert renewals == seen


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_ctrl_c_right_after_a_sync_acquire_gives_the_lease_back(
    kind, tmp_path, request, monkeypatch
):
    """Review finding (session 7): a KeyboardInterrupt landing after the acquire
    committed, before the run's try/finally, left the lease held: the next
    invoke on the thread was refused (ThreadBusyError) for the TTL."""
    import asyncio

    real = Lease._acquired
    armed = {"on": True}

    def ctrl_c(self: Lease, info: Any) -> Any:
        out = real(self, info)
        if armed.pop("on", False):
            raise KeyboardInterrupt
        return out

    async def main() -> None:
        async with _saver(kind, tmp_path, request) as saver:
            graph = chain(2).compile(checkpointer=saver)
            cfg = {"configurable": {"thread_id": "t"}}
            monkeypatch.setattr(Lease, "_acquired", ctrl_c)
            with pytest.raises(KeyboardInterrupt):
                await asyncio.to_thread(graph.invoke, {"log": []}, cfg)
            assert await saver._arun(lo.read_flow("t"), False) is None  # free at once
            out = await asyncio.to_thread(graph.invoke, {"log": []}, cfg)
            assert out["log"] == ["s0", "s1"]

    asyncio.run(main())

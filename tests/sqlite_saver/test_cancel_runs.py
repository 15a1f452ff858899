"""Real cancellations of ``ainvoke`` on AsyncSqliteSaver, landing anywhere in a
run (each flow is one job on aiosqlite's thread, sqlite/worker.py): the
connection is never left in a transaction, no checkpoint is stored twice, and
the thread runs again afterwards.

A cancel landing after the lease acquire committed but before its result
reached the run (asyncio drops an undelivered result) gives the lease back
(``Lease.atry_acquire``): the thread is never left busy for the lease TTL.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.concurrency.graphs import chain
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver


async def _cancel_after(coro, ticks: int) -> bool:
    """Run ``coro``, cancel it after ``ticks`` loop turns; whether it was cancelled."""
    task = asyncio.ensure_future(coro)
    for _ in range(ticks):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return True
    return False


async def test_cancelled_runs_leave_a_consistent_thread(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        graph = chain(3).compile(checkpointer=saver)
        ran_again = 0
        for i in range(40):
            cfg = {"configurable": {"thread_id": f"t{i}"}}
            await _cancel_after(graph.ainvoke({"log": []}, cfg, durability="sync"), i % 20)
            assert not saver.conn.in_transaction
            history = [s async for s in graph.aget_state_history(cfg)]
            ids = [s.config["configurable"]["checkpoint_id"] for s in history]
            assert len(ids) == len(set(ids))
            out = await graph.ainvoke({"log": []}, cfg, durability="sync")  # never busy
            ran_again += 1
            assert out["log"][-3:] == ["s0", "s1", "s2"]
            assert not saver.conn.in_transaction
        assert ran_again == 40

"""An async run cancelled while its lease acquire is on its way back: the acquire
may have committed (the flow runs on in aiosqlite's thread, in the Postgres
server, in a Redis script), but the caller never gets the lease to release. It
must be given back, or the thread stays busy for the lease TTL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.concurrency.test_release_resend import _saver
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import Lease
from threadloom.errors import StorageError

KINDS = ["memory", "sqlite", "postgres", "redis"]


def cancel_after_acquire(saver: Any) -> list[int]:
    """The saver's first write flow (the acquire) commits, then its caller is
    cancelled (a cancel landing while the result is on its way back)."""
    real = saver._arun
    hits: list[int] = []

    async def arun(flow: Any, write: bool = False) -> Any:
        out = await real(flow, write)
        if write and not hits:
            hits.append(1)
            raise asyncio.CancelledError
        return out

    saver._arun = arun
    return hits


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_acquire_gives_the_lease_back(kind, tmp_path, request):
    async with _saver(kind, tmp_path, request) as saver:
        lease = Lease(saver, "t", "run-A", 60.0)
        hits = cancel_after_acquire(saver)
        with pytest.raises(asyncio.CancelledError):
            await lease.atry_acquire()
        assert hits == [1]
        del saver._arun
        assert await saver._arun(lo.read_flow("t"), False) is None  # nobody holds it
        other = Lease(saver, "t", "run-B", 60.0)
        assert await other.atry_acquire() is None  # free at once, not after the TTL
        await other.arelease()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_give_back_leaves_another_holder_alone(kind, tmp_path, request):
    async with _saver(kind, tmp_path, request) as saver:
        holder = Lease(saver, "t", "run-B", 60.0)
        assert await holder.atry_acquire() is None
        loser = Lease(saver, "t", "run-A", 60.0)
        await loser._give_back()  # its token never held the thread
        info = await saver._arun(lo.read_flow("t"), False)
        assert info is not None and info.holder == "run-B"
        await holder.arelease()


async def test_a_give_back_that_fails_warns(tmp_path, request):
    async with _saver("memory", tmp_path, request) as saver:
        lease = Lease(saver, "t", "run-A", 60.0)

        async def down(flow: Any, write: bool = False) -> Any:
            raise StorageError("database is down")

        saver._arun = down
        with pytest.warns(RuntimeWarning, match="could not give back its lease on thread 't'"):
            await lease._give_back()

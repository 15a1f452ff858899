"""A lease acquire/release caches what its TTL clock check found only once its
transaction committed (memory, SQLite and Postgres savers, sync and async).

The acquire checks the thread's clock first, in its own transaction, and erases
an expired thread (storage/expiry.py ``ThreadTTL._lease_clock``). The deadline
it found used to be cached inside that transaction: when the acquire then failed
or was cancelled, the erase and the touch rolled back but the cache said the
thread was fresh, and the next run within ``ttl_touch_every`` skipped the clock
check and read and extended the expired history (the retried run returned
``['old', 'a', 'b', 'new', 'a', 'b']`` instead of ``['new', 'a', 'b']``; a
cancelled ``ainvoke`` on Postgres brought the old history back in 13 of 120
runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

import pytest

from tests.appending import appending
from tests.savers.test_ttl import CASES, Clock, _open
from threadloom.checkpoint.lease import lease as lease_mod
from threadloom.checkpoint.lease.lease import Lease
from threadloom.errors import StorageError

TTL, EVERY = 10.0, 5.0
CONFIG = {"configurable": {"thread_id": "t"}}


def _graph(saver: Any) -> Any:
    return appending("a", "b").compile(checkpointer=saver)


async def _invoke(app: Any, mode: str, value: str) -> list:
    if mode == "sync":
        return (await asyncio.to_thread(app.invoke, {"n": [value]}, CONFIG))["n"]
    return (await app.ainvoke({"n": [value]}, CONFIG))["n"]


def _after_clock(monkeypatch: pytest.MonkeyPatch, taking: bool, then: Callable[[], None]) -> None:
    """The next lease acquire (``taking``) or release whose transaction checks
    the TTL clock calls ``then`` right after that check, inside the transaction
    (``then`` raising makes the transaction fail: its clock work rolls back)."""
    real = lease_mod._ttl_clock
    armed = [True]

    def clock(saver: Any, thread_id: str, taking_: bool) -> Any:
        flow = real(saver, thread_id, taking_)
        if flow is None or taking_ is not taking or not armed[0]:
            return flow
        armed[0] = False
        return _then(flow, then)

    monkeypatch.setattr(lease_mod, "_ttl_clock", clock)


def _then(flow: Any, then: Callable[[], None]) -> Generator[Any, Any, Any]:
    stamp = yield from flow
    then()
    return stamp


def _fail() -> None:
    raise StorageError("injected: the acquire's transaction failed after its clock check")


@pytest.mark.parametrize("kind,mode", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in CASES])
async def test_a_failed_acquire_does_not_leave_an_expired_thread_fresh(
    kind, mode, tmp_path, request, monkeypatch
):
    clock = Clock()
    async with _open(kind, str(tmp_path), request, ttl=TTL, ttl_touch_every=EVERY, clock=clock) as (
        saver,
        _,
    ):
        app = _graph(saver)
        assert await _invoke(app, mode, "old") == ["old", "a", "b"]
        clock.now += TTL + 1  # the thread has expired
        _after_clock(monkeypatch, True, _fail)
        with pytest.raises(StorageError, match="injected"):
            await _invoke(app, mode, "new")
        # the retried run, within ttl_touch_every: the expired history is gone
        assert await _invoke(app, mode, "new") == ["new", "a", "b"]


@pytest.mark.parametrize("kind,mode", [("postgres-async", "async"), ("memory", "async")])
async def test_a_cancelled_acquire_does_not_leave_an_expired_thread_fresh(
    kind, mode, tmp_path, request, monkeypatch
):
    """The run is cancelled while its acquire's transaction is in flight, right
    after the clock check (the cancel lands at the transaction's next await)."""
    clock = Clock()
    async with _open(kind, str(tmp_path), request, ttl=TTL, ttl_touch_every=EVERY, clock=clock) as (
        saver,
        _,
    ):
        app = _graph(saver)
        assert await _invoke(app, mode, "old") == ["old", "a", "b"]
        clock.now += TTL + 1
        run: list[asyncio.Task[Any]] = []
        _after_clock(monkeypatch, True, lambda: run[0].cancel())
        run.append(asyncio.ensure_future(_invoke(app, mode, "new")))
        with pytest.raises(asyncio.CancelledError):
            await run[0]
        # (memory awaits nothing in the acquire: the cancel lands after it, once
        # the run saved its input)
        out = await _invoke(app, mode, "again")
        assert "old" not in out and out[-3:] == ["again", "a", "b"], out


@pytest.mark.parametrize("kind,mode", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in CASES])
async def test_a_lease_caches_the_clock_only_once_committed(
    kind, mode, tmp_path, request, monkeypatch
):
    """Acquire and release, each with its clock due: a committed one caches the
    thread's deadline (so the next access skips the clock row), a failed one
    leaves no cached deadline (its touch rolled back)."""
    clock = Clock()
    async with _open(kind, str(tmp_path), request, ttl=TTL, ttl_touch_every=EVERY, clock=clock) as (
        saver,
        _,
    ):
        app = _graph(saver)
        await _invoke(app, mode, "old")
        lease = Lease(saver, "t", "run-x")

        async def call(name: str) -> Any:
            if mode == "sync":
                return await asyncio.to_thread(getattr(lease, name))
            return await getattr(lease, "a" + name)()

        for taking, name in ((True, "try_acquire"), (False, "release")):
            clock.now += EVERY + 1  # the cached deadline is due for a refresh
            _after_clock(monkeypatch, taking, _fail)
            with pytest.raises(StorageError, match="injected"):
                await call(name)
            assert "t" not in saver._deadlines, name
            monkeypatch.undo()
            if taking:
                assert await call(name) is None
            else:
                await call(name)
            assert saver._deadlines["t"][0] == clock.now + TTL, name

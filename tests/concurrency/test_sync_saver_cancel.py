"""A cancelled ``a*`` call on a sync saver returns only once its worker thread is done.

Review finding (session 8): the sync savers' ``a*`` methods ran their flows in
``asyncio.to_thread``; a cancel stopped only the waiting, so a lease acquire still
in flight could land after the caller had given the lease back, leaving the thread
leased to nobody for the lease's whole TTL (``ThreadBusyError`` on the next run).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from tests.concurrency.backends import make_spec, open_saver
from threadloom.checkpoint.lease import ops as lease_ops
from threadloom.checkpoint.lease.lease import Lease
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.bridge import in_thread


async def test_a_cancel_waits_for_the_worker_to_end() -> None:
    events: list[str] = []
    started = threading.Event()

    def work() -> None:
        started.set()
        time.sleep(0.2)
        events.append("ended")

    task = asyncio.ensure_future(in_thread(work))
    while not started.is_set():
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events == ["ended"]


async def test_a_worker_error_after_the_cancel_is_not_left_unretrieved() -> None:
    def fails() -> None:
        time.sleep(0.05)
        raise RuntimeError("lost connection")

    task = asyncio.ensure_future(in_thread(fails))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await in_thread(lambda: 7) == 7


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_a_cancelled_acquire_leaves_the_thread_free(
    kind: str, tmp_path: Any, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel lands while the acquire's request is in flight: the worker
    holds it until the cancel was sent (events, not sleeps: a loaded box could
    finish a 0.2 s "request" before a 0.05 s sleep of the loop ended)."""
    real_run = drive.run
    in_flight, go, ended = threading.Event(), threading.Event(), threading.Event()

    def slow_acquire(flow: Any, *args: Any, **kwargs: Any) -> Any:
        op = getattr(flow, "gi_frame", None) and flow.gi_frame.f_locals.get("op")
        if not ("cquire" in repr(op) and "run-A" in repr(op)):
            return real_run(flow, *args, **kwargs)
        in_flight.set()  # the acquire's request in flight (a slow network)
        assert go.wait(20)
        try:
            return real_run(flow, *args, **kwargs)
        finally:
            ended.set()

    async def scenario(saver: Any) -> Any:
        task = asyncio.ensure_future(Lease(saver, "t", "run-A", 30.0).atry_acquire())
        assert await asyncio.to_thread(in_flight.wait, 20)
        task.cancel()
        go.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(ended.wait, 20)  # the acquire's request ended
        return await saver._arun(lease_ops.read_flow("t"), False)

    with open_saver(make_spec(kind, str(tmp_path), request)) as saver:
        if kind == "sqlite":
            saver.setup()
        monkeypatch.setattr(drive, "run", slow_acquire)
        held = asyncio.run(scenario(saver))
    assert held is None, f"thread still leased after a cancelled acquire: {held}"

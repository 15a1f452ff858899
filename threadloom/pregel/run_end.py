"""How a leased run ends: what its persisters still owe is saved before the
lease goes (a save after the release is refused), and the release itself is
not left half-done by a Ctrl-C or a second cancel (the thread would stay
locked for the lease TTL). Used by :mod:`threadloom.pregel.multitask`."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any

from threadloom.checkpoint.lease.closing import _CLOSE_WAIT as CLOSE_WAIT
from threadloom.checkpoint.lease.lease import Lease
from threadloom.errors import StorageError

__all__ = [
    "STOP_GRACE",
    "arelease",
    "arelease_anyway",
    "asave_owed",
    "once_more_on_ctrl_c",
    "release",
    "release_anyway",
    "save_owed",
]


def save_owed(lease: Lease) -> None:
    """Save what the run's persisters (its subgraphs' too) still have queued
    before the lease goes: a Ctrl-C that cut the run's own final flush short
    (at any line) leaves it there, and a save after the release is refused."""
    if not lease.lost:
        for persister in list(lease.queued or ()):
            persister.save_queued()


async def asave_owed(lease: Lease, stopping: bool = False) -> None:
    """Async twin of :func:`save_owed`: a cancel or a timeout around the run cut
    its final flush's wait short, while its drain task still saves (or left the
    one save of ``durability="exit"`` queued). Further cancels do not stop this
    wait (anyio cancel scopes cancel again and again): the steps the caller saw
    streamed must be stored before the lease goes. One bound for all of the
    run's persisters: :data:`STOP_GRACE` for a stopped run, else the close wait."""
    if lease.lost:
        return
    loop = asyncio.get_running_loop()
    end = loop.time() + (STOP_GRACE if stopping else CLOSE_WAIT)
    for persister in list(lease.queued or ()):
        await _through_cancels(persister.asave_queued(), end)


STOP_GRACE = 2.0
"""Seconds a stopped run (a cancel, a timeout, a broken-off stream) still waits
for its queued saves before its lease goes: saves take milliseconds, and a
caller's timeout must not turn into ten seconds when the store hangs."""


async def _through_cancels(saving: Any, end: float) -> None:
    """Await ``saving`` to its end (until the loop time ``end``) even if this task
    is cancelled meanwhile; then re-raise the cancel."""
    task = asyncio.ensure_future(saving)
    loop = asyncio.get_running_loop()
    stop: BaseException | None = None
    while not task.done() and loop.time() < end:
        try:
            await asyncio.wait({task}, timeout=end - loop.time())
        except asyncio.CancelledError as exc:
            stop = exc
    if task.done() and not task.cancelled():
        task.exception()  # (retrieved: asave_queued keeps failures for the run)
    if stop is not None:
        raise stop


def release(lease: Lease) -> None:
    """Release; a storage failure here must not turn the run's outcome into an error
    (the lease then simply expires after its TTL)."""
    if lease.lost or lease.released:  # released: by the run's last save
        return
    try:
        lease.release()
    except StorageError as exc:
        msg = f"could not release the lease on thread {lease.thread_id!r}: {exc}"
        warnings.warn(msg, RuntimeWarning, stacklevel=2)


async def arelease(lease: Lease) -> None:
    if lease.lost or lease.released:  # released: by the run's last save
        return
    try:
        await lease.arelease()
    except StorageError as exc:
        msg = f"could not release the lease on thread {lease.thread_id!r}: {exc}"
        warnings.warn(msg, RuntimeWarning, stacklevel=2)


def release_anyway(lease: Lease) -> None:
    """Release, once more if a Ctrl-C cut the release short: a second Ctrl-C
    gives up saving, not the thread, which would stay locked for the lease TTL."""
    once_more_on_ctrl_c(lambda: release(lease))


def once_more_on_ctrl_c(call: Callable[[], Any]) -> Any:
    """``call()``; when a Ctrl-C cuts it short, ``call()`` again, then the Ctrl-C
    goes on (what must not be left half-done when a run ends: the lease release,
    the withdrawal of a stop request)."""
    try:
        return call()
    except KeyboardInterrupt:
        call()
        raise


async def arelease_anyway(lease: Lease) -> None:
    """Async twin of :func:`release_anyway` (a second cancel cut the release short)."""
    try:
        await arelease(lease)
    except asyncio.CancelledError:
        await arelease(lease)
        raise

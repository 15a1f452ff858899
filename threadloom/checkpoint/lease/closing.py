"""A saver closing the connection it opened releases the leases of the runs
still writing through it (see :mod:`.local`, which records them).

The close first marks the saver closing (:func:`enter` refuses a run from
then on) and waits for runs already acquiring to be recorded: a run whose
acquire committed after the close listed the runs held a lease nobody
released (it stayed for the TTL, and the run's own release warned). Then each
recorded run's queued async saves are written, its renewal stopped and its
lease released by the close. The async close does its blocking waits off the
event loop: an async saver serves sync runs of other threads through that
loop (a renewal in flight, an acquire), so waiting on it hung for good.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from typing import Any

from threadloom.checkpoint.lease import local

_CLOSE_WAIT = 10.0  # seconds a close waits, in all, for live runs' queued saves

__all__ = ["aclose_runs", "close_runs", "enter", "leave"]

_GATE = threading.Condition()  # orders enter() against a saver's close (_shut_gate)
# id(saver) -> the event loop (None: a sync run) of each run acquiring through
# it whose lease is not recorded yet
_ENTERING: dict[int, list[Any]] = {}


def _loop() -> Any:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def enter(saver: Any, thread_id: str) -> None:
    """A run is about to take a lease through ``saver`` and :func:`hold` it:
    refused (``SaverClosedError``) once the saver is closing, else counted until
    :func:`leave`, so the close releases its lease too (else it stayed the TTL)."""
    with _GATE:
        if getattr(saver, "_closing", False):
            from threadloom.errors import SaverClosedError

            raise SaverClosedError(type(saver).__name__, thread_id)
        _ENTERING.setdefault(id(saver), []).append(_loop())


def leave(saver: Any) -> None:
    """The run entered by :func:`enter` (on this thread or loop) recorded its
    lease, or gave up."""
    with _GATE:
        entrants = _ENTERING.get(id(saver))
        if entrants is not None:
            loop = _loop()
            if loop in entrants:
                entrants.remove(loop)
            if not entrants:
                del _ENTERING[id(saver)]
        _GATE.notify_all()


def _shut_gate(saver: Any) -> None:
    """Mark ``saver`` closing (no run enters any more) and wait for the runs
    that entered before to be recorded (blocking: an async close runs it off
    its loop). A sync close called on an event loop does not wait for runs of
    that very loop: they could only go on once it returns."""
    here = _loop()
    with _GATE:
        saver._closing = True
        while any(here is None or loop is not here for loop in _ENTERING.get(id(saver), ())):
            _GATE.wait()


def close_runs(saver: Any) -> None:
    """``saver`` closes its own connection next: release the lease of every run
    still writing through it (renewal stopped first, so no renewal uses the
    connection as it goes), and mark the lease so the run's next save raises
    ``SaverClosedError`` naming its thread and its own release does nothing."""
    _shut_gate(saver)
    deadline = time.monotonic() + _CLOSE_WAIT  # one wait for all of its runs' queues
    for holding in local._through(saver):
        for persister in _persisters(holding):
            persister.save_queued(deadline)  # steps already complete are not lost
        lease = _shut(holding, saver)
        if lease is not None:
            lease.halt()  # waits for a renewal of it in flight on the renewer thread
            _cancel_renewal(lease)
            try:
                saver._run(_release_flow(lease), True)
            except Exception as exc:
                _unreleased(lease, exc)
        local.drop(holding)


async def aclose_runs(saver: Any) -> None:
    """Async twin of :func:`close_runs`; its waits run off the loop, which an
    async saver's sync users (a renewal in flight, an acquire) need meanwhile.
    A cancel of the close (a timeout around ``aclose()``, Ctrl-C under
    ``asyncio.run``) waits for it to end first, then propagates: cut half-way,
    the saver's ``finally`` closed the connection under runs whose queue was
    not saved nor lease released."""
    from threadloom.checkpoint.lease.lease import _uncut

    await _uncut(_aclose_runs(saver))


async def _aclose_runs(saver: Any) -> None:
    await asyncio.to_thread(_shut_gate, saver)
    deadline = time.monotonic() + _CLOSE_WAIT  # one wait for all of its runs' queues
    for holding in local._through(saver):
        for persister in _persisters(holding):
            await persister.asave_queued(deadline)
        lease = _shut(holding, saver)
        if lease is not None:
            await asyncio.to_thread(lease.halt)  # the renewal in flight needs this loop
            _cancel_renewal(lease)
            try:
                await saver._arun(_release_flow(lease), True)
            except Exception as exc:
                _unreleased(lease, exc)
        local.drop(holding)


def _persisters(holding: local.Holding) -> list[Any]:
    """The persisters of ``holding``'s run (and its subgraphs) that queue saves
    (durability "async")."""
    lease = holding.lease() if holding.lease is not None else None
    queued = getattr(lease, "queued", None)
    return list(queued) if queued else []


def _shut(holding: local.Holding, saver: Any) -> Any:
    """Mark ``holding``'s lease closed by ``saver``; the lease if it is still
    ours to release (None: released by the run already, lost, or unknown)."""
    lease = holding.lease() if holding.lease is not None else None
    if lease is None:
        return None
    lease.closed_by = type(saver).__name__
    if lease.lost or lease.released:
        return None
    lease.released = True  # the run's own release is a no-op from now on
    return lease


def _cancel_renewal(lease: Any) -> None:
    """An async run's renewal task: cancelled on its own loop (thread-safe)."""
    task = getattr(lease, "_task", None)
    if task is None:
        return
    lease._task = None
    try:
        task.get_loop().call_soon_threadsafe(task.cancel)
    except RuntimeError:  # its loop is closed: the task runs no more anyway
        pass


def _release_flow(lease: Any) -> Any:
    return lease.release_flow()  # (restarts a per-thread TTL clock first)


def _unreleased(lease: Any, exc: Exception) -> None:
    msg = (
        f"closing the saver could not release the lease on thread {lease.thread_id!r}"
        f" (it expires after its TTL): {exc}"
    )
    warnings.warn(msg, RuntimeWarning, stacklevel=3)

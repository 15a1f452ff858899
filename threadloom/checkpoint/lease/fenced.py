"""``FencedSaver``: the saver a leased run writes through.

Every ``put`` / ``put_writes`` on the leased thread runs the lease check as the
first step of the *same* storage transaction (see :mod:`.ops`); reads and
other threads pass straight through. Retention, ``stats`` and ``close`` are
forwarded by :mod:`.passthrough` (retention writing the leased thread is fenced
the same way).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Generator
from typing import Any

from threadloom.checkpoint.lease import lease as _lease
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.custom import aput_each, customised, no_ops, put_each
from threadloom.checkpoint.lease.lease import Lease
from threadloom.checkpoint.lease.passthrough import FencedRetention
from threadloom.checkpoint.lease.redis import LOST_MARKER
from threadloom.checkpoint.lease.resend import aalready_saved, already_saved
from threadloom.checkpoint.saver import BaseCheckpointSaver
from threadloom.checkpoint.storage import step
from threadloom.checkpoint.storage.expiry import unparent_steps
from threadloom.errors import LeaseLostError, SaverClosedError, StorageError

__all__ = ["FencedSaver"]


class FencedSaver(FencedRetention, BaseCheckpointSaver):
    """Wraps a storage saver: writes to the leased thread are fenced by the lease token.

    Reads and other threads pass straight through; retention on the leased
    thread is fenced too (:mod:`.passthrough`). Subgraphs inherit
    the parent's checkpointer, so they write under the parent's lease.
    """

    def __init__(self, inner: Any, lease: Lease) -> None:
        self.inner = inner
        self.lease = lease
        self.serde = inner.serde
        self.created: list[tuple[str, str]] = []  # (ns, checkpoint id) this run stored
        self._inline: int | None = None  # who ran the last fenced put (thread / task id)
        self._check: lo.CheckLease | None = None
        # whether the inner saver's class customises put/put_writes (sync, async):
        # a property of its class, asked once here instead of on every step
        self._custom = (customised(inner, False), customised(inner, True))
        self.get_next_version = inner.get_next_version  # type: ignore[method-assign]  # no hop

    def __getattr__(self, name: str) -> Any:
        # what BaseCheckpointSaver does not define (retention, stats, close are
        # forwarded by FencedRetention): it may write, so the checkpoint read when
        # the lease was taken is no longer served
        state = self.__dict__
        if "inner" not in state:  # half-built (copy, unpickling): no recursion
            raise AttributeError(name)
        if "lease" in state:
            state["lease"].first = _lease.NOT_READ
        return getattr(state["inner"], name)

    def _ours(self, config: Any) -> bool:
        tid = (config.get("configurable") or {}).get("thread_id")
        mine = self.lease.thread_id
        return tid == mine if type(tid) is str else str(tid) == mine

    def _check_op(self) -> lo.CheckLease:
        """The fence op, built once per (token, TTL): it is yielded by every write."""
        lease = self.lease
        op = self._check
        if op is None or op.token != lease.token or op.ttl_ms != lease.ttl_ms:
            op = self._check = lo.CheckLease(lease.thread_id, lease.token, lease.ttl_ms)
        return op

    def _fenced(self, flow: Any) -> Generator[Any, Any, Any]:
        """``flow`` preceded by the fence (what ``lo.check_flow`` does, inlined: hot path)."""
        lease = self.lease
        stop = yield self._check_op()
        if stop is None:
            raise lo.lost(lease.thread_id, lease.holder)
        lease.seen(stop)
        lease.touch()
        return (yield from flow)

    def _guard(self, flow: Any) -> Any:
        if self.lease.closed_by is not None:  # the saver closed under the run
            raise self.lease.closed_error()
        try:
            return self.inner._run(self._fenced(flow), True)
        except (LeaseLostError, StorageError) as exc:
            raise self._lost(exc) from exc

    async def _aguard(self, flow: Any) -> Any:
        if self.lease.closed_by is not None:
            raise self.lease.closed_error()
        try:
            return await self.inner._arun(self._fenced(flow), True)
        except (LeaseLostError, StorageError) as exc:
            raise self._lost(exc) from exc

    def _lost(self, exc: Exception) -> Exception:
        """Mark the lease lost; a Redis script's fence refusal becomes LeaseLostError.
        A write that passed the closed check just as the saver closed (its lease
        released, or the connection refused) reports the close, naming the thread."""
        if self.lease.closed_by is not None:
            return self.lease.closed_error()
        if isinstance(exc, StorageError):
            if LOST_MARKER not in str(exc):
                return exc
            exc = lo.lost(self.lease.thread_id, self.lease.holder)
        self.lease.lost = True
        return exc

    # -- pass-through reads -------------------------------------------------------

    def get_tuple(self, config: Any) -> Any:
        if self.lease.closed_by is not None:
            raise self.lease.closed_error()
        first = self.lease.take_first(config)  # read when the lease was taken
        if first is not _lease.NOT_READ:
            return first
        try:
            return self.inner.get_tuple(config)
        except SaverClosedError as exc:  # the saver closed during the read
            if self.lease.closed_by is None:
                raise
            raise self.lease.closed_error() from exc

    def list(self, config: Any, **kwargs: Any) -> Any:
        return self.inner.list(config, **kwargs)

    async def aget_tuple(self, config: Any) -> Any:
        if self.lease.closed_by is not None:
            raise self.lease.closed_error()
        first = self.lease.take_first(config)
        if first is not _lease.NOT_READ:
            return first
        try:
            return await self.inner.aget_tuple(config)
        except SaverClosedError as exc:
            if self.lease.closed_by is None:
                raise
            raise self.lease.closed_error() from exc

    def alist(self, config: Any, **kwargs: Any) -> Any:
        return self.inner.alist(config, **kwargs)

    # -- fenced writes ------------------------------------------------------------

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if not self._ours(config):
            return self.inner.put(config, checkpoint, metadata, new_versions)
        return self.put_steps([((), (config, checkpoint, metadata, new_versions))])

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if not self._ours(config):
            return self.inner.put_writes(config, writes, task_id, task_path)
        self.put_steps([(((config, writes, task_id, task_path),), None)])

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if not self._ours(config):
            return await self.inner.aput(config, checkpoint, metadata, new_versions)
        return await self.aput_steps([((), (config, checkpoint, metadata, new_versions))])

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        if not self._ours(config):
            return await self.inner.aput_writes(config, writes, task_id, task_path)
        await self.aput_steps([(((config, writes, task_id, task_path),), None)])

    def _all_ours(self, steps: Any) -> bool:
        """Whether every write and checkpoint of ``steps`` is for the leased thread
        (a step's entries usually share one config object: compared once)."""
        last = None
        for writes, checkpoint in steps:
            for w in writes:
                if w[0] is not last:
                    if not self._ours(w[0]):
                        return False
                    last = w[0]
            if checkpoint is not None and checkpoint[0] is not last:
                if not self._ours(checkpoint[0]):
                    return False
                last = checkpoint[0]
        return True

    releases_with_step = True
    """``put_steps(..., release=True)`` also releases the lease in that transaction:
    the runtime's last save of a run (one commit fewer per run)."""

    def put_step(self, writes: Any, checkpoint: Any = None, release: bool = False) -> Any:
        """A step's writes and checkpoint in one transaction, fenced once."""
        return self.put_steps([(writes, checkpoint)], release)

    async def aput_step(self, writes: Any, checkpoint: Any = None, release: bool = False) -> Any:
        """Async twin of :meth:`put_step`."""
        return await self.aput_steps([(writes, checkpoint)], release)

    def put_steps(self, steps: Any, release: bool = False) -> Any:
        """Several steps in one transaction, fenced once (StorageSaver.put_steps);
        ``release``: the lease too (it is then ``released``; only when the fence and
        the writes share a transaction, else the run releases it as usual)."""
        self.lease.first = _lease.NOT_READ  # written: a read at acquire is out of date
        if self.lease.closed_by is not None:
            raise self.lease.closed_error()
        if not self._all_ours(steps):
            return put_each(self, steps)
        if self._touch(False):  # the thread had expired: its checkpoints are gone
            steps = unparent_steps(steps, {self.lease.thread_id})
        if self._custom[0]:
            self._guard(no_ops())  # the fence, in a transaction of its own
            out = put_each(self.inner, steps)
        else:
            try:
                out = self._guard(self._steps_flow(steps, release))
            except LeaseLostError:
                if not release or (out := already_saved(self.inner, steps)) is None:
                    raise
                self.lease.lost = False  # a re-send of a committed release (resend.py)
            self.lease.released |= release
        self._stored(steps, threading.get_ident())
        return out

    async def aput_steps(self, steps: Any, release: bool = False) -> Any:
        """Async twin of :meth:`put_steps`."""
        self.lease.first = _lease.NOT_READ
        if self.lease.closed_by is not None:
            raise self.lease.closed_error()
        if not self._all_ours(steps):
            return await aput_each(self, steps)
        if await self._touch(True):
            steps = unparent_steps(steps, {self.lease.thread_id})
        if self._custom[1]:
            await self._aguard(no_ops())
            out = await aput_each(self.inner, steps)
        else:
            try:
                out = await self._aguard(self._steps_flow(steps, release))
            except LeaseLostError:
                if not release or (out := await aalready_saved(self.inner, steps)) is None:
                    raise
                self.lease.lost = False  # a re-send of a committed release (resend.py)
            self.lease.released |= release
        self._stored(steps, id(asyncio.current_task()))
        return out

    def _steps_flow(self, steps: Any, release: bool = False) -> Generator[Any, Any, Any]:
        if len(steps) == 1:  # the usual case: one generator layer fewer per op
            flow = step.put_step_flow(self.inner.codec, *steps[0])
        else:
            flow = step.put_steps_flow(self.inner.codec, steps)
        if release:
            return _then_release(flow, self.lease.thread_id, self.lease.token)
        return flow

    def _stored(self, steps: Any, caller: int) -> None:
        for _writes, checkpoint in steps:
            if checkpoint is not None:
                self._created(checkpoint[0], checkpoint[1])
                self._inline = caller

    def _touch(self, is_async: bool) -> Any:
        """Per-thread TTL (storage/expiry.py): a fenced write restarts the thread's
        clock (and erases an expired thread first), as an unfenced one does.
        True (awaited, when async) when it erased it: the steps' parent is gone."""
        erased = getattr(self.inner, "_aerased" if is_async else "_erased", None)
        if erased is not None:
            return erased(self.lease.thread_id)
        return _done() if is_async else None

    def _created(self, config: Any, checkpoint: Any) -> None:
        ns = (config.get("configurable") or {}).get("checkpoint_ns") or ""
        self.created.append((ns, checkpoint["id"]))

    def rollback_flow(self) -> Generator[Any, Any, Any]:
        """Delete every checkpoint this run stored (fenced: only while we hold the lease)."""
        from threadloom.checkpoint.lease.rollback import delete_checkpoints_flow

        flow = delete_checkpoints_flow(self.inner.codec, self.lease.thread_id, self.created)
        return self._fenced(flow)

    # -- step boundary (called by the driver for the root run) --------------------

    def at_step_boundary(self, exact: bool = True) -> None:
        """Raise when another run asked this one to stop (its progress is saved).

        With durability "sync" the step's checkpoint was just saved through the
        fence, which reported any request; with "async"/"exit" saves lag behind
        the loop, so the lease is read here unless (``exact`` False: durability
        "async"/"exit") a fence, renewal or read saw it less than ``POLL_EVERY``
        ago (a read per step would wait for the background save on a
        single-connection saver, and cost a round trip).
        """
        lease = self.lease
        if lease.closed_by is not None:
            raise lease.closed_error()
        if not lease.stop and not self._fresh(threading.get_ident()) and (exact or self._stale()):
            self._polled(self.inner._run(lo.read_flow(lease.thread_id)))
        if lease.stop:
            raise lease.stop_error()

    async def aat_step_boundary(self, exact: bool = True) -> None:
        """Async twin of :meth:`at_step_boundary`."""
        lease = self.lease
        if lease.closed_by is not None:
            raise lease.closed_error()
        if (
            not lease.stop
            and not self._fresh(id(asyncio.current_task()))
            and (exact or self._stale())
        ):
            self._polled(await self.inner._arun(lo.read_flow(lease.thread_id)))
        if lease.stop:
            raise lease.stop_error()

    def _stale(self) -> bool:
        return time.monotonic() - self.lease.checked >= _lease.POLL_EVERY  # read late: tunable

    def _fresh(self, caller: int) -> bool:
        """Whether this step's checkpoint was saved inline by the caller (durability
        "sync"): its fence already read the lease after the step, no need to read again."""
        fresh, self._inline = self._inline == caller, None
        return fresh

    def _polled(self, info: lo.LeaseInfo | None) -> None:
        if info is not None and info.token == self.lease.token:
            self.lease.seen(info.stop)


async def _done() -> None:
    return None


def _then_release(flow: Any, thread_id: str, token: str) -> Generator[Any, Any, Any]:
    """``flow``, then the lease's release, in the same transaction."""
    out = yield from flow
    yield lo.ReleaseLease(thread_id, token)
    return out

"""``Lease``: one run's hold on one thread.

A leased run writes through a :class:`~.fenced.FencedSaver` (fenced.py, also
importable from here): every ``put`` / ``put_writes`` on the leased thread runs
the lease check as the first step of the *same* storage transaction (see
:mod:`.ops`), which also extends the lease and reports whether another run
asked this one to stop. A background renewer
keeps the lease alive through long steps; a crashed process stops renewing
and its lease expires after ``ttl``.
"""

from __future__ import annotations

import asyncio
import time
import warnings
import weakref
from collections.abc import Generator
from typing import Any

from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.install import backend_of
from threadloom.checkpoint.lease.renewer import RENEWER
from threadloom.checkpoint.lease.tokens import holder_is_dead, new_token
from threadloom.checkpoint.storage.flows import get_tuple_flow
from threadloom.checkpoint.storage.rereads import run_once
from threadloom.errors import LeaseLostError, SaverClosedError, StorageError, ThreadloomError

__all__ = [
    "DEFAULT_TTL",
    "Lease",
    "holder_is_dead",
    "lease_backend",
    "new_token",
    "FencedSaver",  # noqa: F822 (lazy: module __getattr__)
]

DEFAULT_TTL = 30.0


def lease_backend(saver: Any) -> str | None:
    """The lease backend of ``saver`` (None: it cannot hold leases)."""
    return backend_of(saver)


async def alease_backend(saver: Any) -> str | None:
    """Async twin of :func:`lease_backend` (nothing to await: tables come from setup())."""
    return backend_of(saver)


NOT_READ = object()
"""``Lease.first`` when the acquiring transaction read nothing (or it was used)."""

POLL_EVERY = 0.02
"""Seconds a stop request read by a fence, renewal or poll stays current for the
step-boundary check under "async"/"exit" durability."""


class Lease:
    """One run's lease on one thread: token, holder, TTL, the stop request seen."""

    def __init__(self, saver: Any, thread_id: str, holder: str, ttl: float = DEFAULT_TTL) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.holder = holder
        self.token = new_token()
        self.ttl_ms = max(1, int(ttl * 1000))
        self.stop = ""  # "interrupt" / "rollback" once another run asked us to stop
        self.lost = False
        self.released = False  # released by the run's last save (put_steps release=True)
        self.halted = False  # renewal stopped (a plain flag: nothing waits on it)
        # the saver's class name once it closed under the run (lease/local.py
        # close_runs released the lease): the run's next save is refused
        self.closed_by: str | None = None
        # (weakly) the persisters under durability="async" writing under this lease
        # (the run's and its subgraphs'): the saver's close saves their queued
        # steps before it releases the lease
        self.queued: weakref.WeakSet[Any] | None = None
        self.due = 0.0
        self.checked = 0.0  # monotonic time the stop request was last read
        self._task: asyncio.Task[None] | None = None
        # the thread's latest checkpoint, read in the acquiring transaction
        # (``take_first``); only where that read is exactly ``saver.get_tuple``
        self.prefetch = _prefetches(saver)
        self.first: Any = NOT_READ

    # -- one-shot operations ----------------------------------------------------

    def try_acquire(self) -> lo.LeaseInfo | None:
        """Take the lease; None when taken, else the holder's LeaseInfo.

        A lease whose token names a dead process on this host is taken over at
        once instead of waiting for its TTL (a crashed worker, resumed locally).
        """
        op = lo.AcquireLease(self.thread_id, self.holder, self.token, self.ttl_ms)
        try:
            info = self._take(op)
            if info is not None and holder_is_dead(info.token):
                info = self._take(op._replace_steal(info.token))
            return self._acquired(info)
        except BaseException as exc:
            _ttl_unclocked(self.saver, self.thread_id)
            if not isinstance(exc, Exception):  # Ctrl-C once the acquire may have committed
                self._give_back_now()
            raise

    def _take(self, op: lo.AcquireLease) -> lo.LeaseInfo | None:
        """One acquire transaction; its TTL clock stamp is cached once it committed."""
        info, stamp = self.saver._run(self._acquire_flow(op), True)
        _ttl_clocked(self.saver, self.thread_id, stamp)
        return info

    async def _atake(self, op: lo.AcquireLease) -> lo.LeaseInfo | None:
        info, stamp = await self.saver._arun(self._acquire_flow(op), True)
        _ttl_clocked(self.saver, self.thread_id, stamp)
        return info

    def _give_back_now(self) -> None:
        """Sync twin of :meth:`_give_back` (a KeyboardInterrupt, not a cancel)."""
        try:
            self.saver._run(lo.release_flow(self.thread_id, self.token), True)
        except Exception as exc:
            _warn(self, exc)

    async def atry_acquire(self) -> lo.LeaseInfo | None:
        op = lo.AcquireLease(self.thread_id, self.holder, self.token, self.ttl_ms)
        try:
            info = await self._atake(op)
            if info is not None and holder_is_dead(info.token):
                info = await self._atake(op._replace_steal(info.token))
        except BaseException as exc:
            _ttl_unclocked(self.saver, self.thread_id)
            if isinstance(exc, asyncio.CancelledError):
                await self._give_back()
            raise
        return self._acquired(info)

    async def _give_back(self) -> None:
        """A cancel can reach the caller after the acquire committed (the flow
        runs on in a worker thread or server; on Postgres the COMMIT may have
        reached the server with its reply cut off): nobody would get the lease
        to release, and the thread would stay busy for the TTL. Release by this
        lease's token, which does nothing unless the acquire took it (on
        Postgres its transaction takes the thread's advisory lock first, so it
        runs after the acquire's, however that ended); see :func:`_uncut`."""
        await _uncut(self.saver._arun(lo.release_flow(self.thread_id, self.token), True), self)

    def _acquire_flow(self, op: lo.AcquireLease) -> Generator[Any, Any, Any]:
        """Take the lease and, once taken, read the thread's latest checkpoint in
        the same transaction: the run reads it next anyway, and on SQLite a
        transaction of its own costs a BEGIN and a COMMIT more (the read is
        consistent with the lease: the write lock is held). The flow returns
        ``(info, stamp)``: ``stamp`` is what a per-thread TTL clock check found,
        for ``ThreadTTL._lease_clocked`` once the transaction committed."""
        if self.prefetch == "postgres":
            return _pg_acquire_flow(self, op)
        return self._sqlite_acquire_flow(op)

    def _sqlite_acquire_flow(self, op: lo.AcquireLease) -> Generator[Any, Any, Any]:
        # per-thread TTL: check (and erase, when expired) the thread before the
        # lease keeps it alive (storage/expiry.py); TTL savers never prefetch,
        # so _pg_acquire_flow needs none
        clock = _ttl_clock(self.saver, self.thread_id, True)
        stamp = None if clock is None else (yield from clock)
        info = yield op
        if info is None and self.prefetch:
            latest = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
            self.first = yield from get_tuple_flow(self.saver.codec, latest)
        return info, stamp

    def take_first(self, config: Any) -> Any:
        """The latest checkpoint read when the lease was taken, if ``config``
        asks for exactly it (this thread, root namespace, no checkpoint id);
        else ``NOT_READ``. Served once; the fenced saver drops it on any write
        or call it passes through (``first = NOT_READ``)."""
        first = self.first
        if first is NOT_READ:
            return first
        conf = config.get("configurable") or {}
        tid = conf.get("thread_id")
        if conf.get("checkpoint_ns") or conf.get("checkpoint_id") or tid is None:
            return NOT_READ
        if (tid if type(tid) is str else str(tid)) != self.thread_id:
            return NOT_READ
        self.first = NOT_READ
        return first

    def _acquired(self, info: lo.LeaseInfo | None) -> lo.LeaseInfo | None:
        """Taking the lease wrote no stop request: a read for ``POLL_EVERY``, as a fence."""
        if info is None:
            self.checked = time.monotonic()
        return info

    def renew(self) -> None:
        """Extend the lease; record a stop request; mark the lease lost if it is."""
        try:
            flow = lo.renew_flow(self.thread_id, self.token, self.ttl_ms, self.holder)
            self.seen(self.saver._run(flow, True))
        except LeaseLostError:
            self.lost = True

    async def arenew(self) -> None:
        try:
            flow = lo.renew_flow(self.thread_id, self.token, self.ttl_ms, self.holder)
            self.seen(await self.saver._arun(flow, True))
        except LeaseLostError:
            self.lost = True

    def release_flow(self) -> Generator[Any, Any, Any]:
        """The release; under a per-thread TTL the thread's clock restarts first,
        while the lease still keeps it alive: its TTL counts from the run's end.
        Returns the clock's stamp (``ThreadTTL._lease_clocked``; None: none ran)."""
        clock = _ttl_clock(self.saver, self.thread_id, False)
        stamp = None if clock is None else (yield from clock)
        yield from lo.release_flow(self.thread_id, self.token)
        return stamp

    def release(self) -> None:
        self.halt()
        try:
            stamp = self.saver._run(self.release_flow(), True)
        except BaseException:
            _ttl_unclocked(self.saver, self.thread_id)
            raise
        _ttl_clocked(self.saver, self.thread_id, stamp)

    async def arelease(self) -> None:
        """Release; a cancel of the caller meanwhile does not cut the release
        off (:func:`_uncut`): the run's ``finally`` would not send another, and
        the thread would stay busy for the TTL. A failed release raises."""
        await self.ahalt()
        await _uncut(self._arelease())

    async def _arelease(self) -> None:
        try:
            stamp = await self.saver._arun(self.release_flow(), True)
        except BaseException:
            _ttl_unclocked(self.saver, self.thread_id)
            raise
        _ttl_clocked(self.saver, self.thread_id, stamp)

    def seen(self, stop: str | None) -> None:
        """The stop request the store holds now: one that the run which asked
        withdrew (it gave up waiting: its timeout, a drain) no longer stops us."""
        self.checked = time.monotonic()
        if stop is not None:
            self.stop = stop

    # -- background renewal -----------------------------------------------------

    def touch(self) -> None:
        """The lease was just extended: the next renewal is due a third of the TTL on."""
        self.due = time.monotonic() + self.ttl_ms / 3000.0

    def start_renewal(self) -> None:
        """Have the shared renewer thread extend the lease through long steps."""
        self.touch()
        RENEWER.add(self)

    def halt(self) -> None:
        self.halted = True
        RENEWER.remove(self)

    def astart_renewal(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._arenew_loop())

    async def _arenew_loop(self) -> None:
        period = self.ttl_ms / 3000.0
        while not self.lost and not self.halted:  # (a cancel of this task may be swallowed)
            await asyncio.sleep(period)
            if self.halted:
                return
            try:
                await self.arenew()
            except Exception:
                pass

    async def ahalt(self) -> None:
        """Stop the renewal task without waiting for it: awaiting it here
        swallowed a cancel of the caller landing meanwhile (the cancelled run
        then went on, and finished), or, re-raised, skipped the release that
        follows. A renewal still in flight is harmless: the release deletes
        the row after it, or it finds the row gone."""
        self.halted = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    def closed_error(self) -> SaverClosedError:
        """The run's saver closed under it (:attr:`closed_by`)."""
        return SaverClosedError(self.closed_by or type(self.saver).__name__, self.thread_id)

    def stop_error(self) -> LeaseLostError:
        """Says what became of the stopped run's checkpoints: a caller deciding
        whether to resume it must not be told they are kept after a rollback."""
        kept = (
            "its checkpoints are deleted (rolled back)"
            if self.stop == "rollback"
            else "its checkpoints up to this step are saved"
        )
        return LeaseLostError(
            self.thread_id,
            self.holder,
            f"run {self.holder!r} on thread {self.thread_id!r} stopped at a step boundary:"
            f" another run asked for it (multitask_strategy={self.stop!r}); {kept}",
        )


@run_once
def _pg_acquire_flow(lease: Lease, op: lo.AcquireLease) -> Generator[Any, Any, Any]:
    """Postgres: the latest row travels in the acquire's batch (no round trip of
    its own); its writes/refs/blobs lookups follow in the same transaction, which
    holds the thread's advisory lock from its first statement (no delete or
    prune of the thread interleaves). Marked :func:`run_once`: the driver would
    otherwise run it optimistically first (storage/drive.py), and an optimistic
    transaction guesses the read's pending writes empty. A read that fails to
    decode (a corrupt blob) leaves ``first`` unset: the run's plain
    ``get_tuple`` then reads again and raises as it always did."""
    from threadloom.checkpoint.postgres.leaseread import AcquireRead
    from threadloom.checkpoint.storage.flows import build_tuples
    from threadloom.checkpoint.storage.ops import GetCheckpoint

    info, row = yield AcquireRead(op, GetCheckpoint(lease.thread_id, "", None))
    if info is not None:
        return info, None
    first: Any = None
    if row is not None:
        try:
            first = (yield from build_tuples(lease.saver.codec, [row], remember=True))[0]
        except StorageError:
            raise  # the transaction failed: so does the acquire
        except ThreadloomError:
            first = NOT_READ
    lease.first = first
    return info, None  # (no TTL clock: a TTL saver never prefetches)


async def _uncut(work: Any, warn: Lease | None = None) -> None:
    """Await ``work`` (a release) to its end even when the caller is cancelled
    once meanwhile, then re-raise that cancel: cut off half-way, the lease
    would stay held for its TTL. A second cancel stops only the waiting (the
    release, shielded, finishes on its own). ``warn``: a failure is a
    RuntimeWarning naming the lease's thread (the lease then expires after its
    TTL) instead of an error."""
    done = asyncio.ensure_future(work)
    done.add_done_callback(_retrieved)
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        if done.cancelled():
            raise
        await asyncio.wait([done])  # a second cancel raises here
        if done.exception() is not None and warn is not None:
            _warn(warn, done.exception())
        raise
    except Exception as exc:
        if warn is None:
            raise
        _warn(warn, exc)


def _retrieved(done: asyncio.Future[Any]) -> None:
    """Mark the outcome of a release nobody waits for any more as seen (no
    "exception was never retrieved" log: the lease expires after its TTL)."""
    if not done.cancelled():
        done.exception()


def _warn(lease: Lease, exc: BaseException) -> None:
    msg = (
        f"a cancelled or interrupted run could not give back its lease on thread"
        f" {lease.thread_id!r} (it expires after its TTL): {exc}"
    )
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _ttl_clock(saver: Any, thread_id: str, taking: bool) -> Generator[Any, Any, Any] | None:
    """The per-thread TTL clock flow of a lease acquire/release (``ThreadTTL
    ._lease_clock``); None for savers without one (Redis: lease/redis.py)."""
    clock = getattr(saver, "_lease_clock", None)
    return None if clock is None else clock(thread_id, taking)


def _ttl_clocked(saver: Any, thread_id: str, stamp: Any) -> None:
    """The acquire/release transaction committed: cache what its clock found."""
    if stamp is not None:
        saver._lease_clocked(thread_id, stamp)


def _ttl_unclocked(saver: Any, thread_id: str) -> None:
    """The acquire/release failed or was cancelled: its clock check may have
    rolled back, so the thread's cached deadline is dropped."""
    drop = getattr(saver, "_lease_unclocked", None)
    if drop is not None:
        drop(thread_id)


def _prefetches(saver: Any) -> str | None:
    """Which acquire-time read is exactly what ``saver.get_tuple`` would do
    (``"sqlite"``, ``"postgres"``, None): threadloom's SQLite and Postgres
    savers whose class keeps the stock reads, without a per-thread TTL (its
    clock runs first). Other backends read as before."""
    backend = backend_of(saver)
    if backend not in ("sqlite", "postgres") or getattr(saver, "_ttl_on", True):
        return None
    from threadloom.checkpoint.storage.expiry import ThreadTTL

    cls = type(saver)
    if cls.get_tuple is ThreadTTL.get_tuple and cls.aget_tuple is ThreadTTL.aget_tuple:
        return backend
    return None


def __getattr__(name: str) -> Any:
    """FencedSaver lives in fenced.py (which imports this module); it is also
    importable from here, where it always was, lazily: an eager import made
    ``import threadloom.checkpoint.lease.fenced`` in a fresh process circular."""
    if name == "FencedSaver":
        from threadloom.checkpoint.lease.fenced import FencedSaver

        return FencedSaver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

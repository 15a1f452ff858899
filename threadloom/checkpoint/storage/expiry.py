"""``ThreadTTL``: per-thread expiry for the memory, SQLite and Postgres savers.

Same meaning as Redis's ``ttl=``: a thread expires ``ttl`` seconds after its
last write or read, and not while a run holds its lease (the clock then counts
from the run's end, or its last write or read if later). Reads of an expired
thread see nothing (``get_tuple`` ->
None, ``list`` -> empty) whether or not :meth:`ThreadTTL.sweep_expired` has
erased it yet, so expiry does not depend on when the sweep runs; a write to an
expired thread erases what is left of it first, so old history never returns.

The clock lives in one small row per thread (see :mod:`.ttl`). The hot path
stays cheap: the saver caches each thread's deadline and touches its row at
most once per ``ttl_touch_every`` seconds and per 1/100 of the thread's own TTL
(a thread may therefore expire up to that much before its TTL after its very
last access; the second bound keeps a short ``set_thread_ttl`` thread alive
while it is in use). The clock row belongs to the thread: ``delete_thread`` and
``prune(strategy="delete")`` drop it, and ``copy_thread`` reads it (an expired
source copies nothing).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from typing import Any

from threadloom.checkpoint.base import PruneReport
from threadloom.checkpoint.storage import ttl as t
from threadloom.checkpoint.storage.retention import guard_flow, id_list
from threadloom.errors import ConfigError

__all__ = ["ThreadTTL", "unparent_steps"]

Flow = Generator[Any, Any, Any]

_CACHE_MAX = 100_000


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{what} must be a positive number of seconds or None, got {value!r}")
    return float(value)


def _thread(config: Any) -> str | None:
    tid = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if tid in (None, "") else str(tid)


class ThreadTTL:
    """Mixin (before ``StorageSaver``) adding ``ttl=``, :meth:`set_thread_ttl`
    and :meth:`sweep_expired` / :meth:`asweep_expired`.

    Args:
        ttl: seconds a thread lives after its last write or read (default None:
            forever). With None, only threads given their own TTL through
            :meth:`set_thread_ttl` on this saver expire.
        ttl_touch_every: how often (seconds) a thread's clock row is refreshed
            at most (default ``min(60, ttl / 100)``; must be below ``ttl``). A
            thread is also refreshed once per 1/100 of its own TTL, whatever
            :meth:`set_thread_ttl` gave it.
        clock: ``() -> seconds`` (default ``time.time``); injectable for tests.
    """

    def __init__(
        self,
        *,
        ttl: float | None = None,
        ttl_touch_every: float | None = None,
        clock: Callable[[], float] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.ttl = _seconds(ttl, "ttl")
        every = _seconds(ttl_touch_every, "ttl_touch_every")
        if every is None:
            every = min(60.0, self.ttl / 100) if self.ttl is not None else 60.0
        elif self.ttl is not None and every >= self.ttl:
            raise ConfigError(
                f"ttl_touch_every ({every:g} s) must be below ttl ({self.ttl:g} s): a thread"
                " in use would expire between two refreshes of its clock"
            )
        self.ttl_touch_every = every
        self.clock = clock or time.time
        self._ttl_on = self.ttl is not None
        self._deadlines: dict[str, tuple[float, float]] = {}  # thread -> (deadline, refresh at)

    # -- the clock --------------------------------------------------------------

    def _fresh(self, thread_id: str, now: float) -> bool:
        """Whether the cached deadline may stand in for the clock row (until the
        entry's refresh time, see :meth:`_remember`)."""
        entry = self._deadlines.get(thread_id)
        return entry is not None and now < entry[1]

    def _remember(self, thread_id: str, now: float, until: float | None) -> bool:
        if until is None:
            self._deadlines.pop(thread_id, None)
            return False
        if until == t.UNTRACKED:
            return True
        if len(self._deadlines) >= _CACHE_MAX:
            self._deadlines.clear()
        # refresh once per ttl_touch_every and once per 1/100 of the thread's own
        # TTL (until - now): a thread given a TTL shorter than ttl_touch_every by
        # set_thread_ttl must not expire while in use. Always <= until.
        self._deadlines[thread_id] = (until, now + min(self.ttl_touch_every, (until - now) / 100))
        return True

    def _clock_flow(self, thread_id: str, now: float, write: bool) -> Any:
        return t.sync_flow(self.codec, thread_id, now, self.ttl, write)  # type: ignore[attr-defined]

    def _alive(self, thread_id: str | None, write: bool = False) -> bool:
        """Whether the thread lives (touching its clock when due)."""
        if not self._ttl_on or thread_id is None:
            return True
        now = self.clock()
        if self._fresh(thread_id, now):
            return True
        until = self._run(self._clock_flow(thread_id, now, write), True)  # type: ignore[attr-defined]
        return self._remember(thread_id, now, until)

    async def _aalive(self, thread_id: str | None, write: bool = False) -> bool:
        if not self._ttl_on or thread_id is None:
            return True
        now = self.clock()
        if self._fresh(thread_id, now):
            return True
        until = await self._arun(self._clock_flow(thread_id, now, write), True)  # type: ignore[attr-defined]
        return self._remember(thread_id, now, until)

    def _erased(self, thread_id: str | None) -> bool:
        """Touch the clock for a write; True when the thread had expired and the
        write erased it first (so the checkpoint it names as parent is gone)."""
        if not self._ttl_on or thread_id is None:
            return False
        now = self.clock()
        if self._fresh(thread_id, now):
            return False
        until = self._run(self._clock_flow(thread_id, now, True), True)  # type: ignore[attr-defined]
        self._remember(thread_id, now, until)
        return isinstance(until, t.Restarted)

    async def _aerased(self, thread_id: str | None) -> bool:
        if not self._ttl_on or thread_id is None:
            return False
        now = self.clock()
        if self._fresh(thread_id, now):
            return False
        until = await self._arun(self._clock_flow(thread_id, now, True), True)  # type: ignore[attr-defined]
        self._remember(thread_id, now, until)
        return isinstance(until, t.Restarted)

    def _lease_clock(self, thread_id: str, taking: bool) -> Flow | None:
        """The clock flow a run's lease acquire (``taking``) or release runs in its
        own transaction, before the lease op (``lease/lease.py``); None when due
        for nothing (no TTL, or touched within the refresh interval). The flow
        returns a *stamp* for :meth:`_lease_clocked`, which the caller hands over
        once that transaction has committed.

        Taking: a thread that expired before the run is erased first, as by a
        write, so the lease (which keeps its thread alive, :func:`.ttl.held`)
        never revives an expired history. Releasing: the thread's clock
        restarts at the run's end (the lease, still held, keeps it alive up to
        here even when the run's last write is older than the TTL)."""
        if not self._ttl_on:
            return None
        now = self.clock()
        if self._fresh(thread_id, now):
            return None
        return self._lease_clock_flow(thread_id, now, taking)

    def _lease_clock_flow(self, thread_id: str, now: float, taking: bool) -> Flow:
        # no _remember here: the transaction may still fail, be cancelled, or
        # (Postgres) be refused and run again; see _lease_clocked
        until = yield from self._clock_flow(thread_id, now, taking)
        return now, until

    def _lease_clocked(self, thread_id: str, stamp: tuple[float, Any] | None) -> None:
        """Cache the deadline a lease acquire/release's clock flow found
        (``stamp``: its return, None when none ran), *after* its transaction
        committed. Cached before, a rolled back purge (an acquire failing or
        cancelled after the clock check) read as fresh: the next run within
        ``ttl_touch_every`` skipped the check and read and extended the expired
        history."""
        if stamp is not None:
            self._remember(thread_id, *stamp)

    def _lease_unclocked(self, thread_id: str) -> None:
        """A lease acquire/release failed or was cancelled: whether its clock
        flow committed is unknown, so the next access checks the clock row."""
        self._deadlines.pop(thread_id, None)

    def _peek(self, thread_id: str, now: float) -> Any:
        entry = self._deadlines.get(thread_id)
        if entry is not None and now < entry[0]:
            return None
        return t.peek_flow(thread_id, now, self.ttl)

    def _visible(self, thread_id: str) -> bool:
        """Whether the thread lives, without touching it (cross-thread listing)."""
        now = self.clock()
        flow = self._peek(thread_id, now)
        return flow is None or self._run(flow) is not None  # type: ignore[attr-defined]

    async def _avisible(self, thread_id: str) -> bool:
        now = self.clock()
        flow = self._peek(thread_id, now)
        return flow is None or await self._arun(flow) is not None  # type: ignore[attr-defined]

    # -- reads and writes -------------------------------------------------------

    def get_tuple(self, config: dict[str, Any]) -> Any:
        if self._ttl_on and not self._alive(_thread(config)):
            return None
        return super().get_tuple(config)  # type: ignore[misc]

    def list(self, config: dict[str, Any] | None, **kwargs: Any) -> Iterator[Any]:
        if not self._ttl_on:
            return super().list(config, **kwargs)  # type: ignore[misc]
        tid = _thread(config)
        if tid is not None:
            return super().list(config, **kwargs) if self._alive(tid) else iter(())  # type: ignore[misc]
        seen: dict[str, bool] = {}

        def visible(item: Any) -> bool:
            tid = item.config["configurable"]["thread_id"]
            if tid not in seen:
                seen[tid] = self._visible(tid)
            return seen[tid]

        return (item for item in super().list(config, **kwargs) if visible(item))  # type: ignore[misc]

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self._ttl_on and self._erased(_thread(config)):  # (no parsing without TTL)
            config = _unparented(config)
        return super().put(config, checkpoint, metadata, new_versions)  # type: ignore[misc]

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if self._ttl_on:
            self._alive(_thread(config), write=True)
        super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]

    def put_step(self, writes: Any, checkpoint: Any = None) -> Any:
        if self._ttl_on:
            erased = {tid for tid in _step_threads([(writes, checkpoint)]) if self._erased(tid)}
            if erased:
                ((writes, checkpoint),) = unparent_steps([(writes, checkpoint)], erased)
        return super().put_step(writes, checkpoint)  # type: ignore[misc]

    def put_steps(self, steps: Any) -> Any:
        if self._ttl_on:
            erased = {tid for tid in _step_threads(steps) if self._erased(tid)}
            if erased:
                steps = unparent_steps(steps, erased)
        return super().put_steps(steps)  # type: ignore[misc]

    async def aget_tuple(self, config: dict[str, Any]) -> Any:
        if self._ttl_on and not await self._aalive(_thread(config)):
            return None
        return await super().aget_tuple(config)  # type: ignore[misc]

    async def alist(self, config: dict[str, Any] | None, **kwargs: Any) -> AsyncIterator[Any]:
        tid = _thread(config)
        if tid is not None and not await self._aalive(tid):
            return
        seen: dict[str, bool] = {}
        async for item in super().alist(config, **kwargs):  # type: ignore[misc]
            if tid is not None or not self._ttl_on:
                yield item
                continue
            other = item.config["configurable"]["thread_id"]
            if other not in seen:
                seen[other] = await self._avisible(other)
            if seen[other]:
                yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self._ttl_on and await self._aerased(_thread(config)):
            config = _unparented(config)
        return await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc]

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        if self._ttl_on:
            await self._aalive(_thread(config), write=True)
        await super().aput_writes(config, writes, task_id, task_path)  # type: ignore[misc]

    async def aput_step(self, writes: Any, checkpoint: Any = None) -> Any:
        if self._ttl_on:
            threads = _step_threads([(writes, checkpoint)])
            erased = {tid for tid in threads if await self._aerased(tid)}
            if erased:
                ((writes, checkpoint),) = unparent_steps([(writes, checkpoint)], erased)
        return await super().aput_step(writes, checkpoint)  # type: ignore[misc]

    async def aput_steps(self, steps: Any) -> Any:
        if self._ttl_on:
            erased = {tid for tid in _step_threads(steps) if await self._aerased(tid)}
            if erased:
                steps = unparent_steps(steps, erased)
        return await super().aput_steps(steps)  # type: ignore[misc]

    # -- retention: the clock row lives and dies with the thread ----------------
    # (StorageSaver builds these flows for the sync and async methods and for
    # FencedSaver, so each override covers all three)

    def _delete_thread_flow(self, thread_id: str, force: bool = False) -> Flow:
        flow = super()._delete_thread_flow(thread_id, force)  # type: ignore[misc]
        return self._dropping_clocks(flow, [str(thread_id)])

    def _prune_flow(
        self,
        thread_ids: Sequence[str],
        strategy: str,
        keep_last: int | None,
        before: str | None,
        dry_run: bool = False,
        force: bool = False,
    ) -> Flow:
        # the ids once, as a list: a generator read by the base flow would leave
        # none for the clock rows (a reused id then inherited "never expires")
        ids = id_list(thread_ids, "thread_ids")
        args = (ids, strategy, keep_last, before, dry_run, force)
        flow = super()._prune_flow(*args)  # type: ignore[misc]  # refuses a bare str
        if strategy != "delete" or dry_run:
            return flow
        return self._dropping_clocks(flow, ids)

    def _dropping_clocks(self, flow: Flow, thread_ids: list[str]) -> Flow:
        """``flow`` (which erases the threads), then their clock rows: a new thread
        reusing the id must start with no clock and no ``set_thread_ttl`` override
        of the erased one (a left "never expires" would be inherited)."""
        result = yield from flow
        for thread_id in dict.fromkeys(thread_ids):
            yield t.DropClock(thread_id)
            self._deadlines.pop(thread_id, None)
        return result

    def _copy_thread_flow(self, source: str, target: str, force: bool = False) -> Flow:
        if not self._ttl_on:  # no clock is checked on this saver (as for reads)
            return super()._copy_thread_flow(source, target, force)  # type: ignore[misc]
        return self._copy_live_flow(str(source), str(target), force)

    def _copy_live_flow(self, source: str, target: str, force: bool) -> Flow:
        """``copy_thread`` under TTL. An expired source (not yet swept) reads as
        gone, so it copies nothing, as a source without checkpoints would: its
        old history must not come back under another id. Its clock is read, not
        touched (copying is not a use of the source). Copying writes the target:
        like any write it restarts the target's clock, erasing first what is
        left of an expired target."""
        if source == target:  # the plain flow raises its ConfigError
            return (yield from super()._copy_thread_flow(source, target, force))  # type: ignore[misc]
        yield from guard_flow("copy_thread (target)", [target], force)
        now = self.clock()
        peek = self._peek(source, now)
        if peek is not None and (yield from peek) is None:
            return None
        self._deadlines.pop(target, None)
        yield from self._clock_flow(target, now, True)
        # guarded above, in the same transaction
        return (yield from super()._copy_thread_flow(source, target, True))  # type: ignore[misc]

    # -- operator API -----------------------------------------------------------

    def _override(self, thread_id: str, seconds: float | None) -> tuple[str, float]:
        self._ttl_on = True
        self._deadlines.pop(str(thread_id), None)
        ttl = _seconds(seconds, "set_thread_ttl seconds")
        return str(thread_id), t.FOREVER if ttl is None else ttl

    def set_thread_ttl(self, thread_id: str, seconds: float | None) -> None:
        """Give one thread its own TTL (``None``: it never expires), counted from
        now. Overrides the saver's ``ttl`` until the thread expires."""
        tid, ttl = self._override(thread_id, seconds)
        self._run(t.set_ttl_flow(tid, ttl, self.clock()), True)  # type: ignore[attr-defined]

    async def aset_thread_ttl(self, thread_id: str, seconds: float | None) -> None:
        tid, ttl = self._override(thread_id, seconds)
        await self._arun(t.set_ttl_flow(tid, ttl, self.clock()), True)  # type: ignore[attr-defined]

    def sweep_expired(self, now: float | None = None) -> PruneReport:
        """Delete every expired thread like ``delete_thread`` does (blobs only it
        used are erased); threads whose lease a running run holds are skipped.
        ``bytes_freed`` counts the blob bytes released."""
        now = self.clock() if now is None else now
        totals = [0, 0, 0, 0]
        for tid in self._run(t.expired_flow(now, self.ttl)):  # type: ignore[attr-defined]
            done = self._run(t.sweep_one_flow(self.codec, tid, now, self.ttl), True)  # type: ignore[attr-defined]
            self._count(tid, done, totals)
        return PruneReport(*totals)

    async def asweep_expired(self, now: float | None = None) -> PruneReport:
        """Async twin of :meth:`sweep_expired`."""
        now = self.clock() if now is None else now
        totals = [0, 0, 0, 0]
        for tid in await self._arun(t.expired_flow(now, self.ttl)):  # type: ignore[attr-defined]
            flow = t.sweep_one_flow(self.codec, tid, now, self.ttl)  # type: ignore[attr-defined]
            self._count(tid, await self._arun(flow, True), totals)  # type: ignore[attr-defined]
        return PruneReport(*totals)

    def _count(self, thread_id: str, done: Any, totals: list[int]) -> None:
        if done is not None:
            self._deadlines.pop(thread_id, None)
            for i, n in enumerate(done):
                totals[i] += n


def _step_threads(steps: Any) -> list[str | None]:
    """The threads a batch of ``put_step``s writes to (each clock restarted once),
    as :meth:`ThreadTTL.put` / ``put_writes`` would see them one call at a time."""
    configs = [w[0] for writes, _ in steps for w in writes]
    configs += [checkpoint[0] for _, checkpoint in steps if checkpoint is not None]
    return list(dict.fromkeys(_thread(c) for c in configs))


def _unparented(config: Any) -> Any:
    """``config`` naming no parent checkpoint (a put's ``checkpoint_id``)."""
    conf = dict(config.get("configurable") or {})
    conf.pop("checkpoint_id", None)
    return {**config, "configurable": conf}


def unparent_steps(steps: Any, erased: set[str | None]) -> list[Any]:
    """``steps`` with the first checkpoint of each erased thread naming no parent
    (the ones after it name checkpoints this batch writes)."""
    out, done = [], set()
    for writes, checkpoint in steps:
        tid = None if checkpoint is None else _thread(checkpoint[0])
        if tid in erased and tid not in done:
            done.add(tid)
            checkpoint = (_unparented(checkpoint[0]), *checkpoint[1:])
        out.append((writes, checkpoint))
    return out

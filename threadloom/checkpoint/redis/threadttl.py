"""``set_thread_ttl`` / ``sweep_expired`` on Redis, as on the other savers.

A thread's own TTL is stored with the thread (field ``ttl`` of its ``wi``
hash, see :mod:`.keys`), so it lives and dies with the thread's keys and
every script that re-arms the thread's expiry uses it instead of the saver's
``ttl=`` (-1: never). Setting it re-arms (or, for ``None``, removes) the
expiry of the thread's keys at once. Redis expires keys by itself, so
``sweep_expired`` has nothing to erase: it only drops expired thread ids from
the cross-thread index (:mod:`.index`) and returns an empty report.

Also here, as TTL semantics: both savers' ``prune`` re-arms no thread's TTL
(:func:`untouched_prune`), and their ``ttl=`` is read by :func:`saver_ttl`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import PruneReport
from threadloom.checkpoint.redis.index import live_threads
from threadloom.checkpoint.storage import retention
from threadloom.checkpoint.storage.bridge import in_thread
from threadloom.checkpoint.storage.retention import id_list
from threadloom.errors import ConfigError

if TYPE_CHECKING:
    from threadloom.checkpoint.redis.executor import Plan
    from threadloom.checkpoint.storage.drive import Flow

__all__ = ["AsyncThreadTTL", "SyncThreadTTL", "saver_ttl", "untouched_prune"]

# seconds from which a TTL means "never": EXPIRE refuses far larger values, and
# an SQL saver's deadline that far out never arrives either
_NEVER = 10**12  # ~31,700 years


def saver_ttl(ttl: Any) -> int | None:
    """The saver's ``ttl=`` in whole seconds (rounded up), None for never (None,
    inf), as the SQL savers read it; anything else not above 0 is a ConfigError
    (``int(ttl)`` raised OverflowError/ValueError for inf/NaN). Numeric strings
    stay accepted, as before."""
    if ttl is None:
        return None
    value = ttl
    if isinstance(ttl, str):
        try:
            value = float(ttl)
        except ValueError:
            value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
    return None if value >= _NEVER else max(1, math.ceil(value))


def untouched_prune(
    saver: Any,
    thread_ids: list[str],
    strategy: str,
    keep_last: int | None,
    before: str | None,
    dry_run: bool,
    force: bool,
) -> Flow:
    """The core's prune flow, its listings re-arming no thread's TTL (a dry run
    too): a cron job pruning idle threads must not keep them alive. A module
    function with plain arguments, so a torn read can build it again (rereads.py)."""
    saver._current().touch = False  # first step: inside the flow's transaction
    return (
        yield from retention.prune_flow(
            saver.codec, thread_ids, strategy, keep_last, before, dry_run, True, force
        )
    )


def _own_ttl(thread_id: Any, seconds: Any) -> tuple[str, int]:
    if thread_id is None or thread_id == "":
        raise ConfigError("set_thread_ttl needs a thread id, got an empty one")
    if seconds is None or seconds == math.inf:  # inf: never, as on the SQL savers
        return str(thread_id), -1
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ConfigError(
            f"set_thread_ttl({thread_id!r}): seconds must be a positive number or None, "
            f"got {seconds!r}"
        )
    if seconds >= _NEVER:
        return str(thread_id), -1
    return str(thread_id), max(1, math.ceil(seconds))  # EXPIRE takes whole seconds


class _PruneUntouched:
    """Both savers' prune: see :func:`untouched_prune`."""

    def _prune_flow(
        self,
        thread_ids: Sequence[str],
        strategy: str,
        keep_last: int | None,
        before: str | None,
        dry_run: bool = False,
        force: bool = False,
    ) -> Flow:
        ids = id_list(thread_ids, "thread_ids")  # listed now, before the flow runs
        return untouched_prune(self, ids, strategy, keep_last, before, dry_run, force)


class SyncThreadTTL(_PruneUntouched):
    """For :class:`~.saver.RedisSaver` (its ``_send`` is synchronous)."""

    planner: Any
    _send: Any  # the saver's: one round trip for a batch of calls

    def _drive(self, plan: Plan) -> Any:
        results: Any = None
        while True:
            try:
                batch = plan.send(results)
            except StopIteration as stop:
                return stop.value
            results = self._send(batch)

    def set_thread_ttl(self, thread_id: str, seconds: float | None) -> None:
        """This thread expires ``seconds`` after its last write or read (None: never),
        counted from now, whatever the saver's ``ttl``; kept by later writes."""
        thread, own = _own_ttl(thread_id, seconds)
        self._send([self.planner.lua("set_ttl", thread, own)])

    async def aset_thread_ttl(self, thread_id: str, seconds: float | None) -> None:
        await in_thread(self.set_thread_ttl, thread_id, seconds)

    def sweep_expired(self, now: float | None = None) -> PruneReport:
        """Redis erased expired threads itself; drop their ids from the thread index.
        ``now`` is accepted for symmetry and unused (Redis' own clock decides)."""
        self._drive(live_threads(self.planner))
        return PruneReport()

    async def asweep_expired(self, now: float | None = None) -> PruneReport:
        return await in_thread(self.sweep_expired, now)


class AsyncThreadTTL(_PruneUntouched):
    """For :class:`~.saver.AsyncRedisSaver` (its ``_send`` is a coroutine)."""

    planner: Any
    _send: Any  # the saver's (a coroutine function)
    _sync: Any  # the saver's: runs a coroutine on its loop from another thread

    async def aset_thread_ttl(self, thread_id: str, seconds: float | None) -> None:
        """Async twin of :meth:`SyncThreadTTL.set_thread_ttl`."""
        thread, own = _own_ttl(thread_id, seconds)
        await self._send([self.planner.lua("set_ttl", thread, own)])

    def set_thread_ttl(self, thread_id: str, seconds: float | None) -> None:
        self._sync(self.aset_thread_ttl(thread_id, seconds))

    async def asweep_expired(self, now: float | None = None) -> PruneReport:
        """Async twin of :meth:`SyncThreadTTL.sweep_expired`."""
        plan, results = live_threads(self.planner), None
        while True:
            try:
                batch = plan.send(results)
            except StopIteration:
                return PruneReport()
            results = await self._send(batch)

    def sweep_expired(self, now: float | None = None) -> PruneReport:
        return self._sync(self.asweep_expired(now))

"""Retention and stats on a ``FencedSaver``: forwarded to the inner saver.

``BaseCheckpointSaver`` defines these methods (raising NotImplementedError, or
doing nothing for ``close``), so ``FencedSaver.__getattr__`` never sees them:
each is forwarded here explicitly, and each drops the checkpoint read when the
lease was taken (``lease.first``), since it may change what that read saw.

An operation that writes the leased thread (``delete_thread`` of it, a real
``prune`` naming it, ``copy_thread`` into it, ``delete_for_runs`` finding a
checkpoint of it) is fenced like a checkpoint write: it succeeds while this run
holds the lease (the run is not "busy" against itself, no ``force`` needed) and
raises LeaseLostError, writing nothing, once the lease is lost. The fence takes
the place of the storage flow's lease guard (``retention.guard_flow``), which
runs first in the operation's write transaction, so on SQL backends the check
and the writes are atomic. Other threads keep the usual guard: ThreadBusyError
while another run holds them, unless ``force``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

from threadloom.checkpoint.base import PruneReport
from threadloom.checkpoint.lease import lease as _lease
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.storage import batching
from threadloom.checkpoint.storage.retention import id_list
from threadloom.errors import LeaseLostError, StorageError

__all__ = ["FencedRetention"]

Flow = Generator[Any, Any, Any]


class FencedRetention:
    """Mixin of ``FencedSaver`` (``self.inner``, ``self.lease``, ``_guard``,
    ``_aguard``, ``_check_op`` come from it)."""

    inner: Any
    lease: Any

    def _writes_mine(self, thread_ids: Sequence[Any]) -> bool:
        mine = self.lease.thread_id
        return any(str(t) == mine for t in thread_ids)

    def _as_guard(self, flow: Flow, force: bool) -> Flow:
        """``flow`` (built with ``force=False``) with its lease guard answered here:
        the leased thread's check becomes the fence; another thread's is run as is
        (ThreadBusyError when held), or skipped when ``force``."""
        lease = self.lease
        mine = lease.thread_id
        reply: Any = None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as stop:
                return stop.value
            if type(op) is not lo.ReadLease:
                reply = yield op
            elif op.thread_id == mine:
                stop = yield self._check_op()  # type: ignore[attr-defined]
                if stop is None:
                    raise lo.lost(mine, lease.holder)
                lease.seen(stop)
                lease.touch()
                reply = None  # ours: not busy
            else:
                reply = None if force else (yield op)

    def _retain(self, flow: Flow, force: bool) -> Any:
        self.lease.first = _lease.NOT_READ  # may change what the acquire read saw
        try:
            return self.inner._run(self._as_guard(flow, force), True)
        except (LeaseLostError, StorageError) as exc:
            raise self._lost(exc) from exc  # type: ignore[attr-defined]

    async def _aretain(self, flow: Flow, force: bool) -> Any:
        self.lease.first = _lease.NOT_READ
        try:
            return await self.inner._arun(self._as_guard(flow, force), True)
        except (LeaseLostError, StorageError) as exc:
            raise self._lost(exc) from exc  # type: ignore[attr-defined]

    def _mine(self, thread_id: Any, flow: Callable[[], Flow]) -> Flow | None:
        """``flow()`` (to fence here) when the operation writes the leased thread;
        otherwise None, for the caller to forward to the inner saver. Either way
        the acquire's read is dropped: the operation may change what it saw."""
        self.lease.first = _lease.NOT_READ
        return flow() if self._writes_mine([thread_id]) else None

    def _prune_mine(
        self, thread_ids: list[str], dry_run: bool, args: dict[str, Any]
    ) -> batching.Plan | None:
        """As :meth:`_mine` for ``prune``: a dry run writes nothing, so is forwarded.
        Fenced, the prune still runs in steps of whole threads (storage/batching.py),
        each step fenced in its own transaction."""
        self.lease.first = _lease.NOT_READ
        if dry_run or not self._writes_mine(thread_ids):
            return None
        strategy, keep_last = args["strategy"], args["keep_last"]

        def make(chunk: list[str], before: str | None) -> Flow:
            return self.inner._prune_flow(chunk, strategy, keep_last, before)

        pause = getattr(self.inner, "retention_pause", 0.0)
        return batching.prune_plan(
            make, thread_ids, strategy, keep_last, args["before"], False, True, pause
        )

    def _runs_plan(self, run_ids: Sequence[str]) -> batching.Plan:
        """``delete_for_runs`` in steps of whole threads, each fenced (guarded here)."""
        ids = id_list(run_ids, "run_ids")

        def make(chunk: list[str]) -> Flow:
            return self.inner._delete_for_runs_flow(ids, False, chunk)

        pause = getattr(self.inner, "retention_pause", 0.0)
        return batching.delete_for_runs_plan(make, ids, True, pause)

    # -- sync ---------------------------------------------------------------------

    def delete_thread(self, thread_id: str, *, force: bool = False) -> None:
        flow = self._mine(thread_id, lambda: self.inner._delete_thread_flow(thread_id))
        if flow is None:
            return self.inner.delete_thread(thread_id, force=force)
        self._retain(flow, force)
        return None

    def delete_for_runs(self, run_ids: Sequence[str], *, force: bool = False) -> None:
        # which threads the runs wrote is only known inside the flow: always guarded here
        batching.run_plan(self._runs_plan(run_ids), lambda flow, _: self._retain(flow, force))

    def copy_thread(
        self, source_thread_id: str, target_thread_id: str, *, force: bool = False
    ) -> None:
        flow = self._mine(
            target_thread_id,
            lambda: self.inner._copy_thread_flow(source_thread_id, target_thread_id),
        )
        if flow is None:
            return self.inner.copy_thread(source_thread_id, target_thread_id, force=force)
        self._retain(flow, force)
        return None

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        before: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> PruneReport:
        args = {"strategy": strategy, "keep_last": keep_last, "before": before}
        thread_ids = id_list(thread_ids, "thread_ids")  # read once: see _prune_mine
        plan = self._prune_mine(thread_ids, dry_run, args)
        if plan is None:
            return self.inner.prune(thread_ids, dry_run=dry_run, force=force, **args)
        return batching.run_plan(plan, lambda flow, _: self._retain(flow, force))

    def stats(self, thread_id: str | None = None) -> dict[str, Any]:
        return self.inner.stats(thread_id)

    def close(self) -> None:
        """Does nothing: a fenced saver wraps a saver shared by every run for one
        run's lease and opened nothing itself, so leaving a ``with`` block over it
        (or closing it) must not close the saver the other runs still use."""

    # -- async --------------------------------------------------------------------

    async def adelete_thread(self, thread_id: str, *, force: bool = False) -> None:
        flow = self._mine(thread_id, lambda: self.inner._delete_thread_flow(thread_id))
        if flow is None:
            return await self.inner.adelete_thread(thread_id, force=force)
        await self._aretain(flow, force)
        return None

    async def adelete_for_runs(self, run_ids: Sequence[str], *, force: bool = False) -> None:
        plan = self._runs_plan(run_ids)
        await batching.arun_plan(plan, lambda flow, _: self._aretain(flow, force))

    async def acopy_thread(
        self, source_thread_id: str, target_thread_id: str, *, force: bool = False
    ) -> None:
        flow = self._mine(
            target_thread_id,
            lambda: self.inner._copy_thread_flow(source_thread_id, target_thread_id),
        )
        if flow is None:
            return await self.inner.acopy_thread(source_thread_id, target_thread_id, force=force)
        await self._aretain(flow, force)
        return None

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        before: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> PruneReport:
        args = {"strategy": strategy, "keep_last": keep_last, "before": before}
        thread_ids = id_list(thread_ids, "thread_ids")  # read once: see _prune_mine
        plan = self._prune_mine(thread_ids, dry_run, args)
        if plan is None:
            return await self.inner.aprune(thread_ids, dry_run=dry_run, force=force, **args)
        return await batching.arun_plan(plan, lambda flow, _: self._aretain(flow, force))

    async def astats(self, thread_id: str | None = None) -> dict[str, Any]:
        return await self.inner.astats(thread_id)

    async def aclose(self) -> None:
        """Does nothing, as :meth:`close`."""

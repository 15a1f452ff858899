"""``StorageSaver``: the whole ``BaseCheckpointSaver`` API over the shared flows.

A backend subclasses it and supplies how a flow runs (``_run``/``_arun``/
``_iter``/``_aiter``), normally by handing its executor to :mod:`.drive`.
Nothing here knows SQL or dicts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from threadloom.checkpoint.saver import BaseCheckpointSaver
from threadloom.checkpoint.storage import batching, flows, puts, retention, step
from threadloom.checkpoint.storage.drive import Flow
from threadloom.checkpoint.storage.tuples import ReadCodec

__all__ = ["StorageSaver"]


class StorageSaver(BaseCheckpointSaver):
    """Base of threadloom's savers: content-addressed blobs, list deltas, retention.

    Args:
        serde: serializer (default: ``threadloom.checkpoint.serde.default_serializer()``).
        delta: store appended list items only (default True); False stores every
            changed list whole (still content-addressed).
        compact_every: list chunks per version before the tail is sealed into a
            segment (bounds read cost; default 16).
        keyframe_every: a checkpoint record is a diff against its parent's except
            every this many (bounds read cost; default 16).
        cache_bytes: budget of the decoded-chunk cache (default 64 MiB).
    """

    retention_pause = 0.0
    """Rest between two write steps of a big prune, in multiples of the step's
    time: 1.0 on SQLite, whose lock waiters poll instead of queueing
    (storage/batching.py)."""

    shares_blobs_across_threads = True
    """Identical large values of different threads are stored once (False on
    Redis, whose blobs live with their thread for cluster slot locality)."""

    def __init__(
        self,
        *,
        serde: Any = None,
        delta: bool = True,
        compact_every: int = 16,
        keyframe_every: int = 16,
        cache_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        super().__init__(serde=serde)
        self.codec = ReadCodec(
            self.serde, delta=delta, compact_every=compact_every, cache_bytes=cache_bytes
        )
        self.codec.keyframe_every = max(1, keyframe_every)

    def forget_cached(self) -> None:
        """Drop every row and value this saver keeps in memory.

        The caches check themselves against what any writer can change (SQLite:
        ``PRAGMA data_version`` and ``total_changes``); a restore into the saver's
        own connection (``sqlite3.Connection.backup`` into it, ``deserialize``)
        moves neither, so call this after one."""
        self.codec.forget_thread(None)
        forget = getattr(getattr(self, "executor", None), "forget_cached", None)
        if forget is not None:
            forget()

    # -- how flows run (backends override) ------------------------------------

    def _run(self, flow: Flow, write: bool = False) -> Any:
        raise self._missing("_run")

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        raise self._missing("_arun")

    def _iter(self, flow: Flow) -> Iterator[Any]:
        raise self._missing("_iter")

    def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        raise self._missing("_aiter")

    # -- retention flows: built once for the sync and async methods, and for
    # FencedSaver (lease/passthrough.py), which runs them with its own fence --

    def _delete_thread_flow(self, thread_id: str, force: bool = False) -> Flow:
        return retention.delete_thread_flow(self.codec, str(thread_id), force)

    def _delete_for_runs_flow(
        self, run_ids: Sequence[str], force: bool = False, threads: Sequence[str] | None = None
    ) -> Flow:
        return retention.delete_for_runs_flow(
            self.codec, retention.id_list(run_ids, "run_ids"), force, threads
        )

    def _copy_thread_flow(self, source: str, target: str, force: bool = False) -> Flow:
        return retention.copy_thread_flow(self.codec, str(source), str(target), force)

    def _prune_flow(
        self,
        thread_ids: Sequence[str],
        strategy: str,
        keep_last: int | None,
        before: str | None,
        dry_run: bool = False,
        force: bool = False,
    ) -> Flow:
        """Blobs are counted per thread where they live with their thread (Redis)."""
        ids = retention.id_list(thread_ids, "thread_ids")
        per_thread = not self.shares_blobs_across_threads
        return retention.prune_flow(
            self.codec, ids, strategy, keep_last, before, dry_run, per_thread, force
        )

    # -- retention over many threads: one transaction per step of whole threads
    # (storage/batching.py), so other writers get in between --------------------

    def _prune_plan(
        self,
        thread_ids: Sequence[str],
        strategy: str,
        keep_last: int | None,
        before: str | None,
        dry_run: bool,
        force: bool,
    ) -> batching.Plan:
        ids = retention.id_list(thread_ids, "thread_ids")

        def make(chunk: list[str], checked: str | None) -> Flow:
            return self._prune_flow(chunk, strategy, keep_last, checked, dry_run, force)

        pause = self.retention_pause
        return batching.prune_plan(
            make, ids, strategy, keep_last, before, dry_run, not force, pause
        )

    def _delete_for_runs_plan(self, run_ids: Sequence[str], force: bool) -> batching.Plan:
        ids = retention.id_list(run_ids, "run_ids")

        def make(chunk: list[str]) -> Flow:
            return self._delete_for_runs_flow(ids, force, chunk)

        return batching.delete_for_runs_plan(make, ids, not force, self.retention_pause)

    # -- sync API ---------------------------------------------------------------

    def get_tuple(self, config: dict[str, Any]) -> Any:
        return self._run(flows.get_tuple_flow(self.codec, config))

    def list(
        self,
        config: dict[str, Any] | None,
        *,
        filter: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> Iterator[Any]:
        flow = flows.list_flow(self.codec, config, filter, before, limit)
        return self._iter(flow)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self._run(
            puts.put_flow(self.codec, config, checkpoint, metadata, new_versions), True
        )

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._run(puts.put_writes_flow(self.codec, config, writes, task_id, task_path), True)

    def put_step(self, writes: Sequence[Any], checkpoint: Any = None) -> Any:
        """A step's writes and its checkpoint in ONE write transaction (storage/step.py).

        A subclass overriding ``put``/``put_writes`` must override this too (it
        runs the flows directly, as they do).
        """
        return self._run(step.put_step_flow(self.codec, writes, checkpoint), True)

    def put_steps(self, steps: Sequence[tuple[Sequence[Any], Any]]) -> Any:
        """Several :meth:`put_step`s in ONE write transaction (the async-durability
        drain coalescing what queued up); returns the last checkpoint's config."""
        return self._run(step.put_steps_flow(self.codec, steps), True)

    def delete_thread(self, thread_id: str, *, force: bool = False) -> None:
        self._run(self._delete_thread_flow(thread_id, force), True)

    def delete_for_runs(self, run_ids: Sequence[str], *, force: bool = False) -> None:
        batching.run_plan(self._delete_for_runs_plan(run_ids, force), self._run)

    def copy_thread(
        self, source_thread_id: str, target_thread_id: str, *, force: bool = False
    ) -> None:
        self._run(self._copy_thread_flow(source_thread_id, target_thread_id, force), True)

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        before: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> Any:
        plan = self._prune_plan(thread_ids, strategy, keep_last, before, dry_run, force)
        return batching.run_plan(plan, self._run)

    def stats(self, thread_id: str | None = None) -> dict[str, Any]:
        return self._run(retention.stats_flow(thread_id))

    # -- async API ------------------------------------------------------------

    async def aget_tuple(self, config: dict[str, Any]) -> Any:
        return await self._arun(flows.get_tuple_flow(self.codec, config))

    async def alist(
        self,
        config: dict[str, Any] | None,
        *,
        filter: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Any]:
        flow = flows.list_flow(self.codec, config, filter, before, limit)
        async for item in self._aiter(flow):
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        flow = puts.put_flow(self.codec, config, checkpoint, metadata, new_versions)
        return await self._arun(flow, True)

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        flow = puts.put_writes_flow(self.codec, config, writes, task_id, task_path)
        await self._arun(flow, True)

    async def aput_step(self, writes: Sequence[Any], checkpoint: Any = None) -> Any:
        """Async twin of :meth:`put_step`."""
        return await self._arun(step.put_step_flow(self.codec, writes, checkpoint), True)

    async def aput_steps(self, steps: Sequence[tuple[Sequence[Any], Any]]) -> Any:
        """Async twin of :meth:`put_steps`."""
        return await self._arun(step.put_steps_flow(self.codec, steps), True)

    async def adelete_thread(self, thread_id: str, *, force: bool = False) -> None:
        await self._arun(self._delete_thread_flow(thread_id, force), True)

    async def adelete_for_runs(self, run_ids: Sequence[str], *, force: bool = False) -> None:
        await batching.arun_plan(self._delete_for_runs_plan(run_ids, force), self._arun)

    async def acopy_thread(
        self, source_thread_id: str, target_thread_id: str, *, force: bool = False
    ) -> None:
        await self._arun(self._copy_thread_flow(source_thread_id, target_thread_id, force), True)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
        before: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> Any:
        plan = self._prune_plan(thread_ids, strategy, keep_last, before, dry_run, force)
        return await batching.arun_plan(plan, self._arun)

    async def astats(self, thread_id: str | None = None) -> dict[str, Any]:
        return await self._arun(retention.stats_flow(thread_id))

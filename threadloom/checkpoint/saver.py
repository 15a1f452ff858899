"""``BaseCheckpointSaver``: the one interface the runtime talks to.

Every backend implements the sync methods and their ``a*`` twins. The runtime
only ever calls ``get_tuple``, ``list``, ``put``, ``put_writes``, ``put_step``
and ``get_next_version``; retention (``delete_thread``, ``delete_for_runs``,
``copy_thread``, ``prune``) and ``stats`` are for operators.

Savers are context managers: ``with SqliteSaver.from_conn_string(path) as saver``
closes what the saver opened, and never what the caller passed in.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint import close_once
from threadloom.checkpoint.ids import next_version
from threadloom.errors import SaverClosedError

if TYPE_CHECKING:
    from threadloom.checkpoint.base import (
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        DeltaChannelHistory,
        PruneReport,
        RunnableConfig,
    )
    from threadloom.checkpoint.serde.base import SerializerProtocol

__all__ = ["BaseCheckpointSaver"]


class BaseCheckpointSaver:
    """Stores checkpoints and pending writes for threads.

    Subclasses must implement ``get_tuple``, ``list``, ``put`` and ``put_writes``
    (and their async twins); the rest have sensible defaults or raise
    ``NotImplementedError`` naming the saver.
    """

    serde: SerializerProtocol

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        if serde is None:
            from threadloom.checkpoint.serde import default_serializer

            serde = default_serializer()
        self.serde = serde

    # -- lifetime -----------------------------------------------------------

    _closed = False
    """True once close()/aclose() closed what the saver opened itself: every
    call is then refused (:meth:`_refuse_closed`), never silently reconnected."""

    def _refuse_closed(self) -> None:
        """Raise :class:`~threadloom.errors.SaverClosedError` naming the saver
        (backends call it where a flow starts, when ``_closed`` is set)."""
        raise SaverClosedError(type(self).__name__)

    def _close_runs(self) -> None:
        """Before the saver closes its own connection: runs of this process
        writing through it that were dropped or are finishing save and release
        first; every run still live has its lease released by this close and
        refuses its next save (lease/local.py). Only then may the connection go.
        (Not at interpreter exit: the exit hook saved runs' queues already, and
        nothing may be imported any more.)"""
        if sys.is_finalizing():
            return
        from threadloom.checkpoint.lease import closing, local

        local.settle_saver(self)
        closing.close_runs(self)

    async def _aclose_runs(self) -> None:
        """Async twin of :meth:`_close_runs`."""
        from threadloom.checkpoint.lease import closing, local

        await local.asettle_saver(self)
        await closing.aclose_runs(self)

    async def _aclose_own(self, owns: bool, shut: Callable[[], Awaitable[None]]) -> None:
        """An async saver's ``aclose``: on the caller's connection (``owns``
        False) only runs dropped mid-stream save and release, and the saver keeps
        working; else, once, its runs are closed (:meth:`_aclose_runs`) and
        ``shut`` closes what it opened, even when closing the runs failed."""
        if not owns:
            from threadloom.checkpoint.lease import local

            await local.asettle_saver(self)
            return

        async def body() -> None:
            if self._closed:
                return
            try:
                await self._aclose_runs()
            finally:
                self._closed = True
                await shut()

        await self._aclose_once(body)

    def _close_once(self, body: Callable[[], None]) -> None:
        """Run ``body``, the close of what the saver opened, once. A close called
        while another is under way (another thread) waits for it: running its
        own, it found the runs already marked released and shut the connection
        under the first close's lease releases, leaving those threads locked for
        the lease's TTL."""
        done = close_once.claim(self, threading.get_ident())
        if done is not None:
            done.result()
            return
        try:
            body()
        finally:
            close_once.finished(self)

    async def _aclose_once(self, body: Callable[[], Awaitable[None]]) -> None:
        """Async twin of :meth:`_close_once` (a second ``aclose()`` on any loop
        waits for the first; cancelling the waiter leaves the first running)."""
        done = close_once.claim(self, asyncio.current_task())
        if done is not None:
            await asyncio.shield(asyncio.wrap_future(done))
            return
        try:
            await body()
        finally:
            close_once.finished(self)

    def with_allowlist(self, extra_allowlist: Iterable[type]) -> BaseCheckpointSaver:
        """This saver, trusting the classes of ``extra_allowlist`` too when it
        reads values back (LangGraph 1.2's method; ``compile`` calls it with the
        classes the graph's schemas name). Classes, not LangGraph's ``(module,
        name)`` pairs: names are never resolved (docs/serde.md).

        LangGraph returns a shallow copy. A threadloom saver owns a connection,
        caches and its runs' leases, which a copy would share or split, so it
        widens itself and returns itself, as compile does."""
        from threadloom.graph.allowlist import widen_in_place

        widen_in_place(self, tuple(extra_allowlist))
        return self

    def close(self) -> None:
        """Release what the saver opened itself. Idempotent."""

    async def aclose(self) -> None:
        """Async twin of :meth:`close`. With runs of this process still writing
        through the saver (an async run on this loop), the close runs off the
        loop: their queued saves need the loop to reach the saver first."""
        from threadloom.checkpoint.lease import local

        if local._through(self):  # (a cancel waits for the close to end, then goes on)
            from threadloom.checkpoint.lease.lease import _uncut

            await _uncut(asyncio.to_thread(self.close))
        else:
            self.close()

    def __enter__(self) -> BaseCheckpointSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> BaseCheckpointSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- reading --------------------------------------------------------------

    def get(self, config: RunnableConfig) -> Checkpoint | None:
        """The checkpoint addressed by ``config`` (latest when it has no checkpoint_id)."""
        tup = self.get_tuple(config)
        return tup.checkpoint if tup else None

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint with its metadata, parent and pending writes, or None."""
        raise self._missing("get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, lazily; ``filter`` is equality on metadata keys."""
        raise self._missing("list")

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """What rebuilds each of ``channels`` (``DeltaChannel``s) at ``config``'s
        checkpoint when it holds no value for them: the value at the nearest
        ancestor holding one (``seed``, absent: start empty) and the channel's
        writes stored after it, oldest first (LangGraph 1.2's contract; beta there).
        Walks ``parent_config`` links, so a fork sees only its own ancestors.

        Raises:
            StorageError: the target or an ancestor is not stored (pruned):
                the value cannot be rebuilt.
        """
        from threadloom.checkpoint.delta_history import run_walk

        return run_walk(config, channels, self.get_tuple)

    # -- writing --------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint as a child of ``config``'s checkpoint; return its config.

        Only channels named in ``new_versions`` changed; the others are already
        stored under their current version.
        """
        raise self._missing("put")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against ``config``'s checkpoint.

        If every write targets a special channel (``__error__``, ``__interrupt__``,
        ``__resume__``, ``__scheduled__``) they replace earlier ones; otherwise the
        first write for a given (task_id, index) wins.
        """
        raise self._missing("put_writes")

    def put_step(
        self,
        writes: Sequence[tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]],
        checkpoint: tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]
        | None = None,
    ) -> RunnableConfig | None:
        """Store a step's pending writes, then (optionally) the checkpoint that follows.

        ``writes`` holds ``(config, writes, task_id, task_path)`` entries (the
        arguments of :meth:`put_writes`); ``checkpoint`` is ``(config, checkpoint,
        metadata, new_versions)`` (those of :meth:`put`) or None. Returns what
        ``put`` returns, or None without a checkpoint.

        Why: the runtime saves a step's last writes and its checkpoint together,
        so a saver that can run both in one transaction (threadloom's storage
        savers) pays one commit per step instead of two. This default calls
        ``put_writes`` for each entry and then ``put``: a saver overriding only
        those keeps working, one transaction per call as before.
        """
        for config, task_writes, task_id, task_path in writes:
            self.put_writes(config, task_writes, task_id, task_path)
        return self.put(*checkpoint) if checkpoint is not None else None

    def get_next_version(self, current: str | int | float | None, channel: Any = None) -> str:
        """The version a channel gets when it changes."""
        return next_version(current)

    # -- retention ------------------------------------------------------------

    def delete_thread(self, thread_id: str, *, force: bool = False) -> None:
        """Delete every checkpoint and write of a thread, and blobs only it used.
        Refused (ThreadBusyError) while a run holds the thread's lease, unless ``force``."""
        raise self._missing("delete_thread")

    def delete_for_runs(self, run_ids: Sequence[str], *, force: bool = False) -> None:
        """Delete the checkpoints (and their writes) that the given runs created."""
        raise self._missing("delete_for_runs")

    def copy_thread(
        self, source_thread_id: str, target_thread_id: str, *, force: bool = False
    ) -> None:
        """Copy a thread's whole history under a new thread id."""
        raise self._missing("copy_thread")

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
        """Drop old checkpoints, keeping what the kept ones still need."""
        raise self._missing("prune")

    def stats(self, thread_id: str | None = None) -> dict[str, Any]:
        """Counts and bytes: checkpoints, writes, threads, stored vs logical size."""
        raise self._missing("stats")

    # -- async twins ----------------------------------------------------------

    async def aget(self, config: RunnableConfig) -> Checkpoint | None:
        tup = await self.aget_tuple(config)
        return tup.checkpoint if tup else None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise self._missing("aget_tuple")

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        raise self._missing("alist")
        yield  # pragma: no cover  (makes this an async generator)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async twin of :meth:`get_delta_channel_history`."""
        from threadloom.checkpoint.delta_history import arun_walk

        return await arun_walk(config, channels, self.aget_tuple)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        raise self._missing("aput")

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        raise self._missing("aput_writes")

    async def aput_step(
        self,
        writes: Sequence[tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]],
        checkpoint: tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]
        | None = None,
    ) -> RunnableConfig | None:
        """Async twin of :meth:`put_step` (default: ``aput_writes`` each, then ``aput``)."""
        for config, task_writes, task_id, task_path in writes:
            await self.aput_writes(config, task_writes, task_id, task_path)
        return await self.aput(*checkpoint) if checkpoint is not None else None

    async def adelete_thread(self, thread_id: str, *, force: bool = False) -> None:
        raise self._missing("adelete_thread")

    async def adelete_for_runs(self, run_ids: Sequence[str], *, force: bool = False) -> None:
        raise self._missing("adelete_for_runs")

    async def acopy_thread(
        self, source_thread_id: str, target_thread_id: str, *, force: bool = False
    ) -> None:
        raise self._missing("acopy_thread")

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
        raise self._missing("aprune")

    async def astats(self, thread_id: str | None = None) -> dict[str, Any]:
        raise self._missing("astats")

    def _missing(self, method: str) -> NotImplementedError:
        return NotImplementedError(f"{type(self).__name__} does not implement {method}()")

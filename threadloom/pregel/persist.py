"""[5] Getting checkpoints and writes to the saver, in order, per durability mode.

- ``sync``: every save runs inline, before the loop moves on.
- ``async``: saves go to a FIFO drained by one pool thread (or one asyncio
  task), so they reach the saver in order while the next step runs; at exit
  ``flush()`` saves what that thread has not taken yet itself, still one batch
  at a time and in order (a Ctrl-C there leaves the batch to the pool thread). The queue
  is bounded: producers wait when ``max_pending`` saves are outstanding, so a
  slow saver cannot grow memory without limit.
- ``exit``: the loop submits nothing until it exits.

Writes are buffered, not sent one call each: ``put`` sends the buffered writes
with the checkpoint as one ``saver.put_step`` (one transaction on threadloom's
savers, so a ``sync`` step costs one commit instead of two), and
``save_writes()`` sends them alone. The driver calls ``save_writes()`` whenever
the buffer must not wait for a checkpoint: before a step's tasks start, while
some are still running (before it blocks or yields a chunk), and ``flush()``
does at exit, so nothing buffered outlives a wait, an error, an interrupt or
the run. Savers without ``put_step`` (LangGraph's) get ``put_writes``/``put``.

The first error a background save raises is re-raised by ``flush()``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any

from threadloom.errors import SerializationError
from threadloom.pregel.pool import POOL

__all__ = ["AsyncPersister", "SyncPersister", "accepts_task_path", "uses_put_step"]

MAX_PENDING = 16


_TASK_PATH: dict[Any, bool] = {}  # plain function of a saver method -> its answer


def accepts_task_path(saver: Any, method: str = "put_writes") -> bool:
    """Whether the saver's ``put_writes`` takes a 4th ``task_path`` argument.

    Asked once per run; ``inspect.signature`` costs as much as several saves, so the
    answer is kept per underlying function (a bound method's ``__func__``).
    """
    bound = getattr(saver, method)
    func = getattr(bound, "__func__", None)
    if func is not None and func in _TASK_PATH:
        return _TASK_PATH[func]
    try:
        params = inspect.signature(bound).parameters
    except (TypeError, ValueError):
        return False
    answer = "task_path" in params or len(params) >= 4
    if func is not None:
        _TASK_PATH[func] = answer
    return answer


_PUT_STEP: dict[tuple[type, bool], bool] = {}  # saver class, async -> answer


def uses_put_step(saver: Any, is_async: bool = False) -> bool:
    """Whether the persister may call the saver's ``put_step`` instead of
    ``put_writes``/``put``.

    Only when the class that defines ``put_step`` is not below a class overriding
    ``put``/``put_writes`` in the MRO: a subclass (or a ``__getattr__`` wrapper)
    that customises ``put`` would otherwise be bypassed (a class overriding all
    three, like the per-thread TTL mixin, is fine). Cached per class.
    """
    cls = type(saver)
    key = (cls, is_async)
    answer = _PUT_STEP.get(key)
    if answer is None:
        names = (
            ("aput_step", "aput", "aput_writes") if is_async else ("put_step", "put", "put_writes")
        )
        mro = cls.__mro__
        owners = [next((k for k in mro if n in k.__dict__), None) for n in names]
        step = owners[0]
        answer = step is not None and all(
            o is None or mro.index(o) >= mro.index(step) for o in owners[1:]
        )
        _PUT_STEP[key] = answer
    return answer


_BELOW: dict[tuple[type, str], bool] = {}  # saver class, method -> answer


def _below(saver: Any, many: str) -> bool:
    """Whether ``put_steps`` exists and is defined no higher than ``put_step`` (a
    subclass customising only ``put_step`` must not be bypassed by it). Cached per
    class (asked once per run)."""
    cls = type(saver)
    answer = _BELOW.get((cls, many))
    if answer is None:
        mro = cls.__mro__
        one = many[:-1]
        owner = next((k for k in mro if many in k.__dict__), None)
        step = next((k for k in mro if one in k.__dict__), None)
        answer = owner is not None and step is not None and mro.index(owner) <= mro.index(step)
        _BELOW[(cls, many)] = answer
    return answer


_RELEASE = {"release": True}
_PLAIN: dict[str, bool] = {}


def _as_steps(ops: Any) -> list[tuple[list[Any], Any]]:
    """``(writes, checkpoint)`` ops as steps: writes-only ops join the op after them."""
    steps: list[tuple[list[Any], Any]] = []
    writes: list[Any] = []
    for op_writes, checkpoint in ops:
        writes.extend(op_writes)
        if checkpoint is not None:
            steps.append((writes, checkpoint))
            writes = []
    if writes:
        steps.append((writes, None))
    return steps


_CLOSE_WAIT = 10.0  # seconds a close from another thread waits for a run's queued saves


def _pieces(writes: list[Any], checkpoint: Any) -> list[tuple[list[Any], Any]]:
    """A step's save cut into one save per task's writes, then the checkpoint's."""
    pieces: list[tuple[list[Any], Any]] = [([w], None) for w in writes]
    if checkpoint is not None:
        pieces.append(([], checkpoint))
    return pieces


class _Apart:
    """Saving a batch of steps one save at a time after the batch (one
    transaction) failed to serialize a value: the steps and tasks before and
    beside the bad value are stored, as LangGraph (one call per task's writes
    and per checkpoint) stores them, instead of the whole batch rolling back
    with it. A step whose checkpoint cannot be stored ends the walk: the steps
    after it would name a parent that is not there. The first failure is raised
    once the rest is saved."""

    __slots__ = ("first", "stopped")

    def __init__(self) -> None:
        self.first: SerializationError | None = None
        self.stopped = False

    def failed(self, exc: SerializationError, checkpoint_piece: bool) -> None:
        self.first = self.first or exc
        self.stopped = self.stopped or checkpoint_piece

    def done(self) -> None:
        if self.first is not None:
            raise self.first


class _Buffer:
    """What both persisters share: the writes buffer and how one op is called."""

    saver: Any
    _task_path: bool
    _step: bool

    def _setup(self, saver: Any, durability: str, is_async: bool) -> None:
        self.saver = saver
        self.inline = durability != "async"
        self._step = uses_put_step(saver, is_async)
        self._steps = self._step and _below(saver, "aput_steps" if is_async else "put_steps")
        self.one_transaction = self._step  # writes + checkpoint commit together
        # a leased run's last checkpoint may release the lease in its transaction
        self._releases = self._step and getattr(saver, "releases_with_step", False) is True
        self._last: Any = None  # that checkpoint's put arguments, once submitted
        self._holds = False  # may keep a put (the input checkpoint) for the next one
        self._held: tuple[list[Any], Any] | None = None
        self._task_path = accepts_task_path(saver, "aput_writes" if is_async else "put_writes")
        self._writes: list[tuple[Any, Any, str, str]] = []
        self._queue: deque[tuple[list[Any], Any]] = deque()
        self._error: BaseException | None = None
        lease = getattr(saver, "lease", None)  # a leased run (FencedSaver)
        if not self.inline and lease is not None and hasattr(lease, "queued"):
            if lease.queued is None:  # (a subgraph's persister shares its root's lease)
                lease.queued = weakref.WeakSet()
            lease.queued.add(self)  # its saver's close saves our queue first

    def put(
        self,
        config: Any,
        checkpoint: Any,
        metadata: Any,
        new_versions: Any,
        last: bool = False,
        hold: bool = False,
    ) -> None:
        """The checkpoint, with every write buffered before it. ``last``: the run
        surely ends after it; a fenced saver then releases the lease in the same
        transaction (``FencedSaver.releases_with_step``). ``hold``: the run's input
        checkpoint, which a sync persister sends with the next save in one
        ``put_steps`` (see ``holding``)."""
        writes, self._writes = self._writes, []
        cp = (config, checkpoint, metadata, new_versions)
        if last and self._releases:
            self._last = cp
        if hold and self._holds:
            self._held = (writes, cp)
            return
        self._submit((writes, cp))

    def send_held(self) -> None:
        """Save a held input checkpoint now, alone: the step about to run has user
        code (a raw Pregel graph's nodes read the input directly), which must not
        run while the input is stored nowhere."""
        held, self._held = self._held, None
        if held is not None:
            self._call(*held)

    @property
    def holding(self) -> bool:
        """A held input checkpoint is not saved yet: the first step boundary cannot
        rely on its fence having read the lease."""
        return self._held is not None

    def _release(self, checkpoint: Any) -> dict[str, bool]:
        """The keyword that makes saving ``checkpoint`` also release the lease
        (``release=True``), else none: only a saver that declares
        ``releases_with_step`` ever gets it."""
        return _RELEASE if checkpoint is not None and checkpoint is self._last else _PLAIN

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str) -> None:
        """Buffered until the next ``put`` or ``save_writes()``."""
        self._writes.append((config, writes, task_id, task_path))

    def save_writes(self) -> None:
        """Send the buffered writes now (no checkpoint follows yet)."""
        if self._writes:
            writes, self._writes = self._writes, []
            self._submit((writes, None))

    def _submit(self, op: tuple[list[Any], Any]) -> None:
        raise NotImplementedError

    def _take(self) -> tuple[int, list[tuple[list[Any], Any]]]:
        """Everything queued, as steps: writes-only ops join the op after them."""
        return len(self._queue), _as_steps(self._queue)


_QUEUES: weakref.WeakSet[Any] = weakref.WeakSet()  # SyncPersisters queueing saves ("async")


def _save_at_exit() -> None:
    """At interpreter exit, before the pool's daemon threads freeze: save what
    runs left open (a stream never finished or closed) still have queued. Once
    threads froze, waiting for a batch one of them holds would never end, and
    the run's own flush at finalization saves nothing more."""
    for persister in list(_QUEUES):
        try:
            persister.save_queued()  # what is queued now: a live run may keep queueing
        except BaseException:  # (its failure was kept for a run nobody will resume)
            pass


try:
    threading._register_atexit(_save_at_exit)  # (runs before daemon threads freeze)
except RuntimeError:  # first imported while the interpreter already shuts down
    pass
if hasattr(os, "register_at_fork"):  # a child has none of its parent's runs or threads
    os.register_at_fork(after_in_child=_QUEUES.clear)


class SyncPersister(_Buffer):
    """Runs saver calls inline (``sync``) or on a background FIFO (``async``)."""

    def __init__(self, saver: Any, durability: str, max_pending: int = MAX_PENDING) -> None:
        self._setup(saver, durability, False)
        # "sync": the input checkpoint rides with the first step's save (one commit)
        self._holds = durability == "sync" and self._steps
        if not self.inline:
            _QUEUES.add(self)
        self._cond = threading.Condition()
        self._draining = False  # a drain job is submitted to the pool
        self._busy = False  # a thread is saving a batch taken off the queue
        self._saved = 0  # steps taken off the queue so far (save_queued's bound)
        self._max = max_pending

    def _call_all(self, steps: list[tuple[list[Any], Any]]) -> None:
        """Queued steps: one ``put_steps`` transaction when the saver has it (see
        :class:`_Apart` for a batch holding a value that cannot be stored)."""
        if len(steps) == 1:
            self._call(*steps[0])
        elif not self._steps:
            self._apart(steps, False)
        else:
            try:
                self.saver.put_steps(steps, **self._release(steps[-1][1]))
            except SerializationError:
                self._apart(steps, False)

    def _call(self, writes: list[Any], checkpoint: Any) -> None:
        try:
            self._call_once(writes, checkpoint)
        except SerializationError:
            self._apart([(writes, checkpoint)], True)

    def _apart(self, steps: list[tuple[list[Any], Any]], tried: bool) -> None:
        """Save ``steps`` one by one, and a step that fails its pieces one by one
        (:class:`_Apart`). ``tried``: the first step already failed whole."""
        apart = _Apart()
        for i, (writes, checkpoint) in enumerate(steps):
            if apart.stopped:
                break
            if not (tried and i == 0):
                try:
                    self._call_once(writes, checkpoint)
                    continue
                except SerializationError as exc:
                    if len(_pieces(writes, checkpoint)) < 2:
                        apart.failed(exc, checkpoint is not None)
                        continue
            for piece in _pieces(writes, checkpoint):
                try:
                    self._call_once(*piece)
                except SerializationError as exc:
                    apart.failed(exc, piece[1] is not None)
        apart.done()

    def _call_once(self, writes: list[Any], checkpoint: Any) -> None:
        saver = self.saver
        if self._step:
            saver.put_step(writes, checkpoint, **self._release(checkpoint))
            return
        for w in writes:
            saver.put_writes(*w) if self._task_path else saver.put_writes(*w[:3])
        if checkpoint is not None:
            saver.put(*checkpoint)

    def _submit(self, op: tuple[list[Any], Any]) -> None:
        if self.inline:
            held, self._held = self._held, None
            if held is None:
                self._call(*op)
            else:
                self._call_all(_as_steps((held, op)))
            return
        with self._cond:
            while len(self._queue) >= self._max and self._error is None:
                self._cond.wait()
            self._queue.append(op)
            if not self._draining:
                self._draining = True
                POOL.spawn(self._drain)  # no Future: the drain keeps its own error

    def _drain(self) -> None:
        """The pool thread's job: save batches until the queue is empty."""
        self._save_queued(True)

    def _save_queued(self, job: bool, upto: int | None = None) -> None:
        """Save what is queued, a batch at a time, in order: one thread at a time
        takes a batch (``_busy``); the others wait for it. ``job``: the pool
        thread's drain (it clears ``_draining`` when it finds the queue empty).
        ``upto``: stop once that many steps were saved in all (a run still going
        keeps queueing: waiting for an empty queue would never end)."""
        while True:
            with self._cond:
                while self._busy and (upto is None or self._saved < upto):
                    self._cond.wait()  # (the pool thread may take batch after batch)
                if not self._queue or (upto is not None and self._saved >= upto):
                    if job:
                        self._draining = False
                    self._cond.notify_all()
                    return
                n, steps = self._take()
                self._busy = True
            done = True
            try:
                if self._error is None:
                    self._call_all(steps)
            except Exception as exc:
                self._error = exc
            except BaseException as exc:  # Ctrl-C lands on the run's thread
                if not job:  # keep the batch queued: the pool thread's job saves it
                    done = False
                    raise
                self._error = exc
            finally:
                with self._cond:
                    if done:
                        for _ in range(n):
                            self._queue.popleft()
                        self._saved += n
                    self._busy = False
                    self._cond.notify_all()

    def save_queued(self, deadline: float | None = None) -> None:
        """The saver closes under the run: save the steps already queued (whole
        steps; a failure stays for the run to raise), so closing loses none.
        (``deadline``: the async twin's; saving here is bounded by the queue.)
        Not at interpreter exit: the pool's daemon threads are frozen then, and
        waiting for one of them would never end."""
        if sys.is_finalizing():
            return
        with self._cond:
            upto = self._saved + len(self._queue)  # the steps queued now, no later ones
        self._save_queued(False, upto)

    async def asave_queued(self, deadline: float | None = None) -> None:
        """:meth:`save_queued` from an async close (off its loop)."""
        await asyncio.to_thread(self.save_queued, deadline)

    def flush(self) -> None:
        """Save the buffered writes, wait until every save reached the saver; raise
        the first failure."""
        try:
            self.send_held()
            self.save_writes()
        except BaseException as exc:
            if self._error is None:
                self._error = exc
        if not self.inline and not sys.is_finalizing():
            # what the pool thread has not taken yet is saved here: no hand-over
            # at exit (the pool thread usually has not run yet: on a busy GIL it
            # starts when this thread blocks); its job then finds nothing to do.
            # (Not at interpreter exit: a frozen daemon thread may hold our lock;
            # _save_at_exit already saved the queue, before threads froze.)
            try:
                self._save_queued(False)
            except BaseException as stop:
                # Ctrl-C while saving: what is still queued is the run's finished
                # work, and the run releases its lease right after this flush (a
                # later save from the pool thread would then be refused). Save it
                # here first; a second Ctrl-C gives up.
                try:
                    self._save_queued(False)
                finally:
                    raise stop  # the first interrupt is the one to report
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class AsyncPersister(_Buffer):
    """Async twin: ``aput_step`` (or ``aput_writes``/``aput``) run by one drain task, in order."""

    def __init__(self, saver: Any, durability: str, max_pending: int = MAX_PENDING) -> None:
        self._setup(saver, durability, True)
        self._holds = durability == "sync" and self._steps  # as SyncPersister
        self._drainer: asyncio.Task[None] | None = None
        self._max = max_pending

    def send_held(self) -> None:
        """Queue a held input checkpoint, alone; the next ``throttle()`` saves it."""
        held, self._held = self._held, None
        if held is not None:
            self._queue.append(held)

    def _submit(self, op: tuple[list[Any], Any]) -> None:
        """Queue a save. ``async`` durability: a drain task runs it in the background.
        ``sync``/``exit``: the driver's next ``throttle()``/``flush()`` runs it in the
        run's own task (no task per save, and the lease fence then counts as the
        run's own for the step boundary check). A held input checkpoint goes first:
        the drain sends both in one ``aput_steps``."""
        self.send_held()
        self._queue.append(op)
        if not self.inline and (self._drainer is None or self._drainer.done()):
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    async def _call_all(self, steps: list[tuple[list[Any], Any]]) -> None:
        """:meth:`SyncPersister._call_all`'s twin."""
        if len(steps) == 1:
            await self._call(*steps[0])
        elif not self._steps:
            await self._apart(steps, False)
        else:
            try:
                await self.saver.aput_steps(steps, **self._release(steps[-1][1]))
            except SerializationError:
                await self._apart(steps, False)

    async def _call(self, writes: list[Any], checkpoint: Any) -> None:
        try:
            await self._call_once(writes, checkpoint)
        except SerializationError:
            await self._apart([(writes, checkpoint)], True)

    async def _apart(self, steps: list[tuple[list[Any], Any]], tried: bool) -> None:
        """:meth:`SyncPersister._apart`'s twin."""
        apart = _Apart()
        for i, (writes, checkpoint) in enumerate(steps):
            if apart.stopped:
                break
            if not (tried and i == 0):
                try:
                    await self._call_once(writes, checkpoint)
                    continue
                except SerializationError as exc:
                    if len(_pieces(writes, checkpoint)) < 2:
                        apart.failed(exc, checkpoint is not None)
                        continue
            for piece in _pieces(writes, checkpoint):
                try:
                    await self._call_once(*piece)
                except SerializationError as exc:
                    apart.failed(exc, piece[1] is not None)
        apart.done()

    async def _call_once(self, writes: list[Any], checkpoint: Any) -> None:
        saver = self.saver
        if self._step:
            await saver.aput_step(writes, checkpoint, **self._release(checkpoint))
            return
        for w in writes:
            await (saver.aput_writes(*w) if self._task_path else saver.aput_writes(*w[:3]))
        if checkpoint is not None:
            await saver.aput(*checkpoint)

    async def _drain(self) -> None:
        while self._queue:
            n, steps = self._take()
            try:
                if self._error is None:
                    await self._call_all(steps)
            except asyncio.CancelledError:
                # The task running the save was cancelled (the run itself, for
                # sync/exit durability): keep the saves queued so the flush at
                # exit sends them again. A save is one transaction, so it either
                # rolled back or committed, and saving the same checkpoint and
                # writes twice stores them once.
                raise
            except BaseException as exc:
                self._error = exc
            for _ in range(n):
                self._queue.popleft()

    async def asave_queued(self, deadline: float | None = None) -> None:
        """Async twin of :meth:`SyncPersister.save_queued`: waits for the drain task
        on its own loop (this one, or another loop running in another thread,
        until ``deadline``)."""
        drainer = self._drainer
        if drainer is None or drainer.done():
            return
        if drainer.get_loop() is not asyncio.get_running_loop():
            await asyncio.to_thread(self.save_queued, deadline)
            return
        try:
            await asyncio.shield(drainer)
        except Exception:  # the drain keeps its failure for the run
            pass

    def save_queued(self, deadline: float | None = None) -> None:
        """A close from another thread than the run's loop: wait for the drain
        task there, until ``deadline`` (``time.monotonic()``; default: 10 s from
        now; a close of many runs shares one). On the run's own loop nothing can
        drain while the close blocks it: an async close (``aclose``) saves the
        queue instead."""
        drainer = self._drainer
        if drainer is None or drainer.done() or sys.is_finalizing():
            return
        loop = drainer.get_loop()
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is here or loop.is_closed() or not loop.is_running():
            return
        if deadline is None:
            deadline = time.monotonic() + _CLOSE_WAIT
        done = asyncio.run_coroutine_threadsafe(self.asave_queued(), loop)
        try:
            done.result(max(0.0, deadline - time.monotonic()))
        except Exception:  # a timeout or the drain's failure: the run reports its own
            pass

    async def throttle(self) -> None:
        """Wait for the submitted saves: all of them (sync), or enough to get under
        the bound (async). Buffered writes stay buffered."""
        if self.inline or len(self._queue) > self._max:
            await self._wait()

    async def _wait(self) -> None:
        if self._drainer is not None and not self._drainer.done():
            await asyncio.shield(self._drainer)
        while self._queue:  # inline saves, or submitted after the drainer finished
            await self._drain()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    async def flush(self) -> None:
        """Save the buffered writes and wait for every save; raise the first failure."""
        self.send_held()
        self.save_writes()
        await self._wait()

"""The sync persister: saves inline (``sync``), or on a pool thread's FIFO
(``async``) with the run's thread saving what is left at its end, and the
interpreter-exit hook that saves what streams left open still have queued
(see :mod:`threadloom.pregel.persist`)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import weakref
from typing import Any

from threadloom.errors import SerializationError
from threadloom.pregel.persist import MAX_PENDING, _as_steps, _Buffer, apart
from threadloom.pregel.pool import POOL

__all__ = ["SyncPersister"]


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
        self._busy: int | None = None  # the thread saving a batch taken off the queue
        self._saved = 0  # steps taken off the queue so far (save_queued's bound)
        self._max = max_pending

    def _call_all(self, steps: list[tuple[list[Any], Any]]) -> None:
        """Queued steps: one ``put_steps`` transaction when the saver has it (see
        :func:`~threadloom.pregel.persist.apart` for a batch holding a value that cannot be stored)."""
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
        (:func:`~threadloom.pregel.persist.apart`)."""
        walk, failed = apart(steps, tried), None
        while True:
            try:
                piece = walk.send(failed)
            except StopIteration:
                return
            try:
                self._call_once(*piece)
                failed = None
            except SerializationError as exc:
                failed = exc

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
        takes a batch (``_busy``: its thread id); the others wait for it. ``job``:
        the pool thread's drain (it clears ``_draining`` when it finds the queue
        empty). ``upto``: stop once that many steps were saved in all (a run still
        going keeps queueing: waiting for an empty queue would never end).

        A Ctrl-C can land on the run's thread at any line: the claim is given back
        by the ``finally`` whatever line it landed on (a claim left set hung every
        later save), and a batch counts as saved only once its save returned."""
        me = threading.get_ident()
        while True:
            n, done = 0, False
            try:
                with self._cond:
                    # (the pool thread may take batch after batch; a claim of this
                    # thread's own is one a Ctrl-C cut off in the ``finally``)
                    while self._busy not in (None, me) and (upto is None or self._saved < upto):
                        self._cond.wait()
                    if not self._queue or (upto is not None and self._saved >= upto):
                        if job:
                            self._draining = False
                        self._cond.notify_all()
                        return
                    self._busy = me
                    n, steps = self._take()
                if self._error is None:
                    self._call_all(steps)
                done = True
            except Exception as exc:
                self._error, done = exc, True  # dropped, the run raises the error
            except BaseException as exc:  # Ctrl-C on the run's thread: the batch stays queued
                if not job:
                    raise
                self._error, done = exc, True
            finally:
                if self._busy == me:
                    with self._cond:
                        if done:
                            for _ in range(n):
                                self._queue.popleft()
                            self._saved += n
                        self._busy = None
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
        stop: BaseException | None = None  # a Ctrl-C: raised once the queue is saved
        try:
            self.send_held()
            self.save_writes()
        except Exception as exc:
            if self._error is None:
                self._error = exc
        except BaseException as exc:
            stop = exc
        if not self.inline and not sys.is_finalizing():
            # what the pool thread has not taken yet is saved here: no hand-over
            # at exit (the pool thread usually has not run yet: on a busy GIL it
            # starts when this thread blocks); its job then finds nothing to do.
            # (Not at interpreter exit: a frozen daemon thread may hold our lock;
            # _save_at_exit already saved the queue, before threads froze.)
            try:
                self._save_queued(False)
            except BaseException as exc:
                # Ctrl-C while saving: what is still queued is the run's finished
                # work, and the run releases its lease right after this flush (a
                # later save from the pool thread would then be refused). Save it
                # here first; a second Ctrl-C gives up.
                stop = stop or exc
                try:
                    self._save_queued(False)
                finally:
                    raise stop  # the first interrupt is the one to report
        if stop is not None:
            raise stop
        if self._error is not None:
            error, self._error = self._error, None
            raise error

"""The sync driver: load, loop, run tasks, save, and yield stream chunks.

All decisions live in :class:`~threadloom.pregel.loop.Loop`; a driver only does
the I/O (saver reads, running tasks, waiting for events) and shapes output.
The async twin is ``adriver.py``; helpers both use are in ``step_common.py``.
"""

from __future__ import annotations

import contextvars
import heapq
import queue
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

from threadloom.channels.delta_fill import fill_delta
from threadloom.errors import (
    GraphBubbleUp,
)
from threadloom.pregel.options import make_scope, prepare
from threadloom.pregel.persist import SyncPersister, is_stop, note_unsaved
from threadloom.pregel.pool import POOL
from threadloom.pregel.runner import run_task
from threadloom.pregel.step_common import (
    Done,
    cache_lookup,
    cache_store,
    latest_config,
    lone_task,
    max_concurrency,
    raise_step_errors,
    recursion_error,
    require_addressed,
    runs_user_code,
)
from threadloom.pregel.stream import shape_output

__all__ = ["stream_run"]


class _SyncRun:
    """One sync run: an event queue shared with the pool threads, drained in order."""

    def __init__(self, graph: Any, input: Any, config: Any, kw: dict[str, Any]) -> None:
        self.q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.loop, self.opts, self.stream_mode = prepare(
            graph, input, config, self.q.put, kw, SyncPersister
        )
        self.subgraphs = bool(kw.get("subgraphs"))
        self.print_mode = kw.get("print_mode") or ()
        self.done: list[Done] = []
        # events taken off the queue ahead of their turn by _gather_done, in order
        self.held: deque[Any] = deque()
        self.max_concurrency = max_concurrency(self.opts.run.config)

    def shape(self, ev: Any) -> tuple[bool, Any]:
        if ev[1] in self.print_mode:
            print(f"[{ev[1]}] {ev[2]!r}")
        return shape_output(ev, self.stream_mode, self.subgraphs)

    def drain(self) -> Iterator[Any]:
        q, held = self.q, self.held
        while held or not q.empty():  # the driver is the only consumer: no exception per call
            ev = held.popleft() if held else q.get_nowait()
            if isinstance(ev, Done):
                self.done.append(ev)
                continue
            ok, chunk = self.shape(ev)
            if ok:
                yield chunk

    def discard(self) -> None:
        """Drop the events queued so far (keeping the tasks' done markers)."""
        for _ in self.drain():
            pass

    def end_step(self) -> Iterator[Any]:
        """``after_tick`` (apply, stream values, save), then the step's chunks.
        A failed save (not an interrupt) drops what the step emitted since the
        tasks ended: LangGraph never streams a step that was not stored, and
        ``durability="sync"`` promises a step streamed as done is stored."""
        pending = list(self.drain())
        try:
            self.loop.after_tick()
        except GraphBubbleUp:
            yield from pending
            raise
        except BaseException:
            self.discard()
            yield from pending
            raise
        yield from pending
        yield from self.drain()

    def _gather_done(self) -> None:
        """Tasks that finished together are committed in task order, as
        LangGraph's wait on its set of futures does: the done markers queued
        behind the one just taken join it; other events are held, in order, for
        their turn. Committed in arrival order, three nodes interrupting in one
        step came back in a different order from run to run (and from
        ``get_state().interrupts``) whenever a save let the pool threads race."""
        q = self.q
        while not q.empty():
            ev = q.get_nowait()
            if isinstance(ev, Done):
                self.done.append(ev)
            else:
                self.held.append(ev)

    def _get(self, deadline: float | None, step: int) -> Any:
        if self.held:
            return self.held.popleft()
        if deadline is None:
            return self.q.get()
        try:
            return self.q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(f"step {step} did not finish within step_timeout") from None

    def _next(self, save: Callable[[], None], deadline: float | None, step: int) -> Any:
        """The next event; when none is ready, the finished tasks' writes are saved first.

        Before saving, the running tasks get the GIL once (``sleep(0)``): tasks that
        were about to finish then join this save instead of costing one each.
        """
        if self.held:
            return self.held.popleft()
        q = self.q
        try:
            return q.get_nowait()
        except queue.Empty:
            pass
        time.sleep(0)
        try:
            return q.get_nowait()
        except queue.Empty:
            save()  # nothing ready: save what finished while we wait
        return self._get(deadline, step)

    def run_step(self) -> Iterator[Any]:
        """Run the step's unfinished tasks (a lone one inline), committing each as it ends.

        Committed writes are buffered by the persister: they are saved before the
        driver waits or yields while tasks still run, and the last ones go with
        the step's checkpoint (``after_tick``) in one ``put_step``.
        """
        loop = self.loop
        save = self.opts.persister.save_writes if self.opts.persister is not None else _nothing
        todo = [t for t in loop.tasks.values() if not t.writes]
        results: list[tuple[Any, BaseException | None]] = []
        timeout = loop.graph.step_timeout
        deadline = time.monotonic() + timeout if timeout else None
        if todo:
            self._before_tasks(todo)
        if len(todo) == 1 and deadline is None:
            exc = run_task(make_scope(loop, todo[0]))
            loop.commit(todo[0], exc)
            results.append((todo[0], exc))
        elif todo:
            rank = {id(t): i for i, t in enumerate(todo)}
            ready: list[tuple[int, Done]] = []  # finished, by task order (a heap)
            waiting = list(reversed(todo))
            for _ in range(min(self.max_concurrency, len(todo))):
                self._submit(waiting.pop())
            remaining = len(todo)
            while remaining:
                if self.done:
                    for done in self.done:
                        heapq.heappush(ready, (rank[id(done.scope.task)], done))
                    self.done.clear()
                if not ready:
                    ev = self._next(save, deadline, loop.step)
                    if isinstance(ev, Done):
                        self.done.append(ev)
                        if remaining > 1:
                            time.sleep(0)  # tasks about to finish join this one
                        self._gather_done()
                    else:
                        save()
                        ok, chunk = self.shape(ev)
                        if ok:
                            yield chunk
                    continue
                item = heapq.heappop(ready)[1]
                remaining -= 1
                if waiting:  # no save here: finished writes wait for a lull, grouped
                    self._submit(waiting.pop())
                exc = item.result.result()
                loop.commit(item.scope.task, exc)
                results.append((item.scope.task, exc))
        if loop.error_handlers:
            results = self.handle(results, deadline)
        raise_step_errors(results)

    def handle(self, results: list[Any], deadline: float | None = None) -> list[Any]:
        """Run the error handlers of this step's failed nodes (error_handlers.py)."""
        from threadloom.pregel.error_handlers import run_handlers

        persister = self.opts.persister
        save = persister.save_writes if persister else _nothing
        return run_handlers(self.loop, results, save, lambda ts: self._batch(ts, deadline))

    def _batch(self, tasks: list[Any], deadline: float | None) -> list[BaseException | None]:
        """Run ``tasks`` at once on the pool (``max_concurrency`` at a time) and
        return their outcomes in order; past ``deadline`` the step times out, as
        while its other tasks ran (handlers count toward ``step_timeout``)."""
        loop = self.loop
        if len(tasks) == 1 and deadline is None:
            return [run_task(make_scope(loop, tasks[0]))]
        out: list[BaseException | None] = []
        size = self.max_concurrency
        for i in range(0, len(tasks), size):
            futs = [
                POOL.submit(contextvars.copy_context().run, run_task, make_scope(loop, t))
                for t in tasks[i : i + size]
            ]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            _, pending = futures.wait(futs, timeout=left)
            if pending:
                raise TimeoutError(f"step {loop.step} did not finish within step_timeout")
            out.extend(f.result() for f in futs)
        return out

    def _before_tasks(self, todo: list[Any]) -> None:
        persister = self.opts.persister
        if persister is not None:
            if persister.holding and runs_user_code(todo):
                persister.send_held()  # the input rides only with a plumbing-only step
            persister.save_writes()  # writes from before the tasks (cache hits, a resume)

    def run_lone(self) -> bool:
        """``run_step`` for the usual step, one task to run and no step timeout: run
        inline without a generator; False (nothing done) for any other step."""
        loop = self.loop
        lone = lone_task(loop)
        if lone is None:
            return False
        self._before_tasks([lone])
        exc = run_task(make_scope(loop, lone))
        loop.commit(lone, exc)
        if exc is not None:
            results = [(lone, exc)]
            raise_step_errors(self.handle(results) if loop.error_handlers else results)
        return True

    def _submit(self, task: Any) -> None:
        scope = make_scope(self.loop, task)
        fut = POOL.submit(contextvars.copy_context().run, run_task, scope)
        fut.add_done_callback(lambda f, s=scope: self.q.put(Done(s, f)))


def _nothing() -> None:
    return None


def _finish(run: Any, exc: BaseException | None, flush: Callable[[], None]) -> bool:
    """Exit the loop and flush saves; True when ``exc`` (an interrupt) is swallowed."""
    suppress = run.loop.exit(exc)
    if run.opts.persister is not None:
        if not is_stop(exc):
            flush()
        else:
            try:
                flush()
            except Exception as error:
                note_unsaved(exc, error)  # type: ignore[arg-type]
    return suppress


def stream_run(graph: Any, input: Any, config: Any, kw: dict[str, Any]) -> Iterator[Any]:
    """The sync driver behind :meth:`Pregel.stream`."""
    run = _SyncRun(graph, input, config, kw)
    loop, opts = run.loop, run.opts
    saved = None
    if opts.checkpointer is not None:
        if opts.replay is not None and loop.is_nested:
            saved = opts.replay.get_checkpoint(loop.ns, opts.checkpointer, opts.checkpoint_config)
        else:
            saved = opts.checkpointer.get_tuple(opts.checkpoint_config)
        saved = fill_delta(graph.channels, opts.checkpointer, saved)
    require_addressed(loop, opts, saved)
    if saved is not None and opts.run.checkpoint_id:
        latest = opts.checkpointer.get_tuple(latest_config(opts.checkpoint_config))
        loop.superseded = latest is not None and latest.checkpoint["id"] != saved.checkpoint["id"]
    boundary = None if loop.is_nested else getattr(opts.checkpointer, "at_step_boundary", None)
    try:
        loop.start(saved)
        yield from run.drain()
        while loop.tick():
            if boundary is not None:  # a leased run another run asked to stop
                # exact unless the input checkpoint (and its fence) is still held
                boundary(opts.durability == "sync" and not opts.persister.holding)
            if opts.cache is not None:
                cache_lookup(loop)
            if not run.run_lone():
                yield from run.run_step()
            if opts.cache is not None:
                cache_store(loop)
            yield from run.end_step()
    except GeneratorExit as exc:  # the caller stopped iterating: save, yield nothing more
        _finish(run, exc, lambda: opts.persister.flush())
        raise
    except BaseException as exc:
        suppress = _finish(run, exc, lambda: opts.persister.flush())
        yield from run.drain()
        if not suppress:
            raise
    else:
        _finish(run, None, lambda: opts.persister.flush())
        yield from run.drain()
    if loop.status == "out_of_steps":
        raise recursion_error(loop)
    if loop.status == "draining":  # saved and flushed above: the thread resumes from here
        raise loop.drained()

"""The async driver behind :meth:`Pregel.astream` (twin of ``driver.py``).

Tasks run as asyncio tasks (sync node functions on the shared pool); events from
other threads (a sync subgraph running in the pool) reach the queue through
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from threadloom.channels.delta_fill import afill_delta
from threadloom.errors import GraphBubbleUp
from threadloom.pregel.options import make_scope, prepare
from threadloom.pregel.persist import AsyncPersister, is_stop, note_unsaved
from threadloom.pregel.runner import arun_task
from threadloom.pregel.step_common import (
    Done,
    cache_apply,
    cache_keys,
    cache_pairs,
    cache_wanted,
    latest_config,
    lone_task,
    raise_step_errors,
    recursion_error,
    require_addressed,
    runs_user_code,
)
from threadloom.pregel.stream import shape_output

__all__ = ["astream_run"]


async def _limited(sem: asyncio.Semaphore | None, scope: Any) -> BaseException | None:
    if sem is None:
        return await arun_task(scope)
    async with sem:
        return await arun_task(scope)


async def _before_tasks(persister: Any, todo: list[Any]) -> None:
    if persister.holding and runs_user_code(todo):
        persister.send_held()  # the input rides only with a plumbing-only step
    persister.save_writes()  # writes from before the tasks (cache hits, a resume)
    await persister.throttle()


async def _handle(
    run: Any, results: list[Any], persister: Any, deadline: float | None = None
) -> list[Any]:
    """Run the error handlers of this step's failed nodes (error_handlers.py): all
    at once (``max_concurrency`` at a time), within what is left of the step's
    ``step_timeout``, their outcomes in the order the handlers were made."""
    from threadloom.pregel.error_handlers import arun_handlers

    loop = run.loop

    async def batch(tasks: list[Any]) -> list[BaseException | None]:
        if len(tasks) == 1 and deadline is None:
            return [await arun_task(make_scope(loop, tasks[0]))]
        limit = run.opts.run.config.get("max_concurrency")
        sem = asyncio.Semaphore(int(limit)) if limit else None
        every = asyncio.gather(*(_limited(sem, make_scope(loop, t)) for t in tasks))
        if deadline is None:
            return list(await every)
        try:
            return list(await asyncio.wait_for(every, max(0.0, deadline - run.aloop.time())))
        except asyncio.TimeoutError:
            raise TimeoutError(f"step {loop.step} did not finish within step_timeout") from None

    return await arun_handlers(loop, results, persister, batch)


class _AsyncRun:
    def __init__(self, graph: Any, input: Any, config: Any, kw: dict[str, Any]) -> None:
        self.aq: asyncio.Queue[Any] = asyncio.Queue()
        self.aloop = asyncio.get_running_loop()
        self.owner = threading.get_ident()
        self.loop, self.opts, self.stream_mode = prepare(
            graph, input, config, self.put, kw, AsyncPersister
        )
        self.subgraphs = bool(kw.get("subgraphs"))
        self.done: list[Done] = []
        self.pending: list[Any] = []  # chunks held back by a failing end_step, yielded first

    def put(self, ev: Any) -> None:
        if threading.get_ident() == self.owner:
            self.aq.put_nowait(ev)
        else:
            self.aloop.call_soon_threadsafe(self.aq.put_nowait, ev)

    async def end_step(self) -> list[Any]:
        """:meth:`~threadloom.pregel.driver._SyncRun.end_step`'s twin; the save of
        ``durability="sync"`` runs in ``throttle()``, so it is inside too."""
        pending = self.drain()
        persister = self.opts.persister
        try:
            self.loop.after_tick()
            if persister is not None:
                await persister.throttle()
        except GraphBubbleUp:
            self.pending = pending  # yielded by the caller's error path, first
            raise
        except BaseException:
            self.drain()  # the step's events: its checkpoint was not stored
            self.pending = pending
            raise
        return pending + self.drain()

    def drain(self) -> list[Any]:
        out = []
        aq = self.aq
        while not aq.empty():  # the driver is the only consumer: no exception per call
            ev = aq.get_nowait()
            if isinstance(ev, Done):
                self.done.append(ev)
                continue
            ok, chunk = shape_output(ev, self.stream_mode, self.subgraphs)
            if ok:
                out.append(chunk)
        return out

    async def _get(self, deadline: float | None, step: int) -> Any:
        if deadline is None:
            return await self.aq.get()
        try:
            return await asyncio.wait_for(self.aq.get(), max(0.0, deadline - self.aloop.time()))
        except asyncio.TimeoutError:
            raise TimeoutError(f"step {step} did not finish within step_timeout") from None

    async def run_step(self) -> AsyncIterator[Any]:
        """Run the step's unfinished tasks; committed writes are saved as in the sync
        driver: before waiting or yielding while tasks run, the last ones with the
        step's checkpoint."""
        loop, persister = self.loop, self.opts.persister
        todo = [t for t in loop.tasks.values() if not t.writes]
        results: list[tuple[Any, BaseException | None]] = []
        timeout = loop.graph.step_timeout
        deadline = self.aloop.time() + timeout if timeout else None
        if todo and persister is not None:
            await _before_tasks(persister, todo)
        if len(todo) == 1 and deadline is None:
            exc = await arun_task(make_scope(loop, todo[0]))
            loop.commit(todo[0], exc)
            results.append((todo[0], exc))
        else:
            limit = self.opts.run.config.get("max_concurrency")
            sem = asyncio.Semaphore(int(limit)) if limit else None
            running = []
            for task in todo:
                scope = make_scope(loop, task)
                t = self.aloop.create_task(_limited(sem, scope))
                t.add_done_callback(lambda f, s=scope: self.aq.put_nowait(Done(s, f)))
                running.append(t)
            try:
                async with aclosing(self._wait_tasks(len(todo), deadline, results)) as events:
                    async for chunk in events:
                        yield chunk
            except (asyncio.CancelledError, GeneratorExit):
                for t in running:  # the run was stopped: so are its nodes, as in LangGraph
                    t.cancel()
                raise
        if loop.error_handlers:
            results = await _handle(self, results, persister, deadline)
        if persister is not None and persister.inline:
            await persister.throttle()
        raise_step_errors(results)

    async def _wait_tasks(
        self, remaining: int, deadline: float | None, results: list[Any]
    ) -> AsyncIterator[Any]:
        """The step's events until ``remaining`` tasks are done; their outcomes
        committed into ``results``."""
        loop, persister = self.loop, self.opts.persister
        while remaining:
            if not self.done:
                if persister is not None and self.aq.empty():
                    await asyncio.sleep(0)  # tasks about to finish join this save
                    if self.aq.empty():
                        persister.save_writes()  # nothing ready: save while we wait
                        await persister.throttle()
                ev = await self._get(deadline, loop.step)
                if isinstance(ev, Done):
                    self.done.append(ev)
                else:
                    if persister is not None:
                        persister.save_writes()
                        await persister.throttle()
                    ok, chunk = shape_output(ev, self.stream_mode, self.subgraphs)
                    if ok:
                        yield chunk
                continue
            item = self.done.pop(0)
            remaining -= 1
            exc = item.result.result()
            loop.commit(item.scope.task, exc)
            results.append((item.scope.task, exc))

    async def run_lone(self) -> bool:
        """``run_step`` for the usual step, one task to run and no step timeout, without
        an async generator per step; False (nothing done) for any other step."""
        loop, persister = self.loop, self.opts.persister
        lone = lone_task(loop)
        if lone is None:
            return False
        if persister is not None:
            await _before_tasks(persister, [lone])
        exc = await arun_task(make_scope(loop, lone))
        loop.commit(lone, exc)
        results = [(lone, exc)]
        if exc is not None and loop.error_handlers:
            results = await _handle(self, results, persister)
        if persister is not None and persister.inline:
            await persister.throttle()
        raise_step_errors(results)
        return True

    async def finish(self, exc: BaseException | None) -> bool:
        suppress = self.loop.exit(exc)
        if self.opts.persister is not None:
            if not is_stop(exc):
                await self.opts.persister.flush()
            else:
                try:
                    await self.opts.persister.flush()
                except Exception as error:
                    note_unsaved(exc, error)  # type: ignore[arg-type]
        return suppress


async def astream_run(
    graph: Any, input: Any, config: Any, kw: dict[str, Any]
) -> AsyncIterator[Any]:
    """Async twin of :func:`~threadloom.pregel.driver.stream_run`."""
    run = _AsyncRun(graph, input, config, kw)
    loop, opts = run.loop, run.opts
    saved = None
    if opts.checkpointer is not None:
        if opts.replay is not None and loop.is_nested:
            saved = await opts.replay.aget_checkpoint(
                loop.ns, opts.checkpointer, opts.checkpoint_config
            )
        else:
            saved = await opts.checkpointer.aget_tuple(opts.checkpoint_config)
        saved = await afill_delta(graph.channels, opts.checkpointer, saved)
    require_addressed(loop, opts, saved)
    if saved is not None and opts.run.checkpoint_id:
        latest = await opts.checkpointer.aget_tuple(latest_config(opts.checkpoint_config))
        loop.superseded = latest is not None and latest.checkpoint["id"] != saved.checkpoint["id"]
    boundary = None if loop.is_nested else getattr(opts.checkpointer, "aat_step_boundary", None)
    try:
        loop.start(saved)
        if opts.persister is not None:
            await opts.persister.throttle()  # the input checkpoint (sync: before any chunk)
        for c in run.drain():
            yield c
        while loop.tick():
            if boundary is not None:  # a leased run another run asked to stop
                # exact unless the input checkpoint (and its fence) is still held
                await boundary(opts.durability == "sync" and not opts.persister.holding)
            if wanted := cache_wanted(loop):
                cache_apply(loop, wanted, await opts.cache.aget(cache_keys(wanted)))
            if not await run.run_lone():
                async for c in run.run_step():
                    yield c
            if opts.cache is not None and opts.cache_writes:
                await opts.cache.aset(cache_pairs(loop))
            for c in await run.end_step():
                yield c
    except GeneratorExit as exc:  # the caller stopped iterating: save, yield nothing more
        await run.finish(exc)
        raise
    except BaseException as exc:
        suppress = await run.finish(exc)
        held, run.pending = run.pending, []
        for c in held + run.drain():
            yield c
        if not suppress:
            raise
    else:
        await run.finish(None)
        for c in run.drain():
            yield c
    if loop.status == "out_of_steps":
        raise recursion_error(loop)
    if loop.status == "draining":  # saved and flushed above: the thread resumes from here
        raise loop.drained()

"""Sync and async drivers: load, loop, run tasks, save, and yield stream chunks.

All decisions live in :class:`~threadloom.pregel.loop.Loop`; a driver only does
the I/O (saver reads, running tasks, waiting for events) and shapes output.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from threadloom.constants import NS_END, NS_SEP
from threadloom.errors import GraphInterrupt, GraphRecursionError, ParentCommand
from threadloom.pregel.context import CURRENT, RunContext, TaskScope, parse_config
from threadloom.pregel.loop import Loop
from threadloom.pregel.persist import AsyncPersister, SyncPersister
from threadloom.pregel.pool import POOL
from threadloom.pregel.runner import arun_task, run_task
from threadloom.pregel.stream import Emitter, StreamSink, normalize_modes, shape_output
from threadloom.pregel.writes import CONTROL_WRITES
from threadloom.types import Command

__all__ = ["RunOptions", "astream_run", "stream_run"]


@dataclass(slots=True)
class RunOptions:
    """Per-run settings the loop reads (resolved once, before the first step)."""

    run: RunContext
    checkpointer: Any
    durability: str
    persister: Any
    emitter: Emitter
    output_keys: Any
    interrupt_before: Any
    interrupt_after: Any
    checkpoint_config: dict[str, Any]
    parent_scratchpad: Any
    parent_resuming: bool | None
    parent_resume_map: Any
    cache: Any
    custom: Any
    child_sink: StreamSink | None
    cache_writes: list[Any] = field(default_factory=list)


class _Done:
    __slots__ = ("scope", "result")

    def __init__(self, scope: TaskScope, result: Any) -> None:
        self.scope = scope
        self.result = result


def _parent_scope(config: Any) -> TaskScope | None:
    scope = ((config or {}).get("configurable") or {}).get("__pregel_scope")
    return scope if scope is not None else CURRENT.get()


def prepare(
    graph: Any, input: Any, config: Any, put: Any, kw: dict[str, Any], persister_cls: Any
) -> tuple[Loop, RunOptions, Any]:
    """Resolve config, checkpointer, namespaces and sinks into a Loop (not started)."""
    parent = _parent_scope(config)
    run = parse_config(config, parent)
    stream_mode = kw.get("stream_mode") or ("values" if parent is not None else graph.stream_mode)
    modes = set(normalize_modes(stream_mode)) | set(normalize_modes(kw.get("print_mode") or []))
    if kw.get("debug") or graph.debug:
        modes.add("debug")
    ns = run.checkpoint_ns
    if parent is not None:
        if cnt := parent.task.scratchpad.subgraph_counter():
            ns = f"{ns}{NS_SEP}{cnt}"
        if graph.checkpointer is True:
            ns = NS_SEP.join(part.split(NS_END)[0] for part in ns.split(NS_SEP))
        run = RunContext(
            run.config, run.thread_id, ns, None, run.checkpoint_map, run.recursion_limit, parent
        )
    if graph.checkpointer is False:
        checkpointer = None
    elif parent is not None:
        checkpointer = parent.checkpointer
    elif graph.checkpointer is True:
        raise RuntimeError("checkpointer=True cannot be used for root graphs.")
    else:
        checkpointer = graph.checkpointer
    durability = kw.get("durability") or (parent.durability if parent is not None else "async")
    own_sink = StreamSink(modes, put)
    parent_sink = parent.stream if parent is not None else None
    emitter = Emitter(
        tuple(ns.split(NS_SEP)) if ns else (), [own_sink] + ([parent_sink] if parent_sink else [])
    )
    child_sink = own_sink if kw.get("subgraphs") else parent_sink
    if "custom" in modes:

        def custom(chunk: Any, _put: Any = put) -> None:
            scope = CURRENT.get()
            task_ns = scope.task.checkpoint_ns if scope is not None else ""
            _put((tuple(task_ns.split(NS_SEP)[:-1]), "custom", chunk))

    elif parent is not None and parent.stream is not None:
        custom = parent.custom
    else:
        custom = None
    user_conf = {
        k: v
        for k, v in (run.config.get("configurable") or {}).items()
        if not k.startswith("__pregel")
    }
    user_conf.update({"checkpoint_ns": ns})
    if run.thread_id is not None:
        user_conf["thread_id"] = run.thread_id
    if run.checkpoint_id:
        user_conf["checkpoint_id"] = run.checkpoint_id
    elif ns in run.checkpoint_map and parent is not None:
        user_conf["checkpoint_id"] = run.checkpoint_map[ns]
    else:
        user_conf.pop("checkpoint_id", None)
    if checkpointer is not None and run.thread_id is None:
        from threadloom.errors import ConfigError

        raise ConfigError(
            'Checkpointer requires config["configurable"]["thread_id"]; '
            'pass config={"configurable": {"thread_id": "..."}}'
        )
    opts = RunOptions(
        run=run,
        checkpointer=checkpointer,
        durability=durability,
        persister=persister_cls(checkpointer, durability) if checkpointer is not None else None,
        emitter=emitter,
        output_keys=kw.get("output_keys")
        if kw.get("output_keys") is not None
        else graph.stream_channels_asis,
        interrupt_before=kw.get("interrupt_before") or graph.interrupt_before_nodes,
        interrupt_after=kw.get("interrupt_after") or graph.interrupt_after_nodes,
        checkpoint_config={
            **{k: v for k, v in run.config.items() if k != "configurable"},
            "configurable": user_conf,
        },
        parent_scratchpad=parent.task.scratchpad if parent is not None else None,
        parent_resuming=parent.resuming if parent is not None else None,
        parent_resume_map=parent.resume_map if parent is not None else None,
        cache=(parent.cache if parent is not None and parent.cache is not None else graph.cache),
        custom=custom,
        child_sink=child_sink,
    )
    return Loop(graph, input, opts), opts, stream_mode


def make_scope(loop: Loop, task: Any) -> TaskScope:
    o = loop.o
    return TaskScope(
        task=task,
        run=o.run,
        # lent to nested graphs; a graph without one (checkpointer=False) passes its parent's on
        checkpointer=o.checkpointer
        or (o.run.parent.checkpointer if o.run.parent is not None else None),
        durability=o.durability,
        resuming=loop.resuming_flag,
        resume_map=loop.resume_map,
        stream=o.child_sink,
        custom=o.custom,
        cache=o.cache,
    )


def _cache_lookup(loop: Loop) -> None:
    cache = loop.o.cache
    if cache is None:
        return
    wanted = [t for t in loop.tasks.values() if t.cache_key is not None and not t.writes]
    if not wanted:
        return
    found = cache.get([(t.cache_key.ns, t.cache_key.key) for t in wanted])
    for t in wanted:
        hit = found.get((t.cache_key.ns, t.cache_key.key))
        if hit is not None:
            t.writes.extend(hit)
            loop.put_writes(t.id, t.writes, cached=True)


def _cache_store(loop: Loop) -> None:
    o = loop.o
    if o.cache is None or not o.cache_writes:
        return
    pairs = {
        (t.cache_key.ns, t.cache_key.key): (
            [w for w in t.writes if w[0] not in CONTROL_WRITES],
            t.cache_key.ttl,
        )
        for t in o.cache_writes
    }
    o.cache_writes.clear()
    o.cache.set(pairs)


def _raise_step_errors(results: list[tuple[Any, BaseException | None]]) -> None:
    interrupts: list[Any] = []
    for _task, exc in results:
        if exc is None:
            continue
        if isinstance(exc, GraphInterrupt):
            interrupts.append(exc)
        else:
            raise exc
    if interrupts:
        raise GraphInterrupt(
            tuple(i for exc in interrupts for i in (exc.args[0] if exc.args else ()))
        )


def _recursion_error(loop: Loop) -> GraphRecursionError:
    return GraphRecursionError(
        f"Recursion limit of {loop.o.run.recursion_limit} reached without hitting a stop condition. "
        "You can increase the limit by setting the `recursion_limit` config key."
    )


def _mark_parent_command(exc: BaseException, loop: Loop) -> None:
    if isinstance(exc, ParentCommand) and loop.is_nested:
        cmd = exc.args[0]
        if (
            isinstance(cmd, Command)
            and cmd.graph == Command.PARENT
            and not getattr(exc, "resolved", False)
        ):
            exc.resolved = True  # type: ignore[attr-defined]


def stream_run(graph: Any, input: Any, config: Any, kw: dict[str, Any]) -> Iterator[Any]:
    """The sync driver behind :meth:`Pregel.stream`."""
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    loop, opts, stream_mode = prepare(graph, input, config, q.put, kw, SyncPersister)
    subgraphs = bool(kw.get("subgraphs"))
    print_mode = kw.get("print_mode") or ()

    done: list[_Done] = []

    def shape(ev: Any) -> tuple[bool, Any]:
        if ev[1] in print_mode:
            print(f"[{ev[1]}] {ev[2]!r}")
        return shape_output(ev, stream_mode, subgraphs)

    def drain() -> Iterator[Any]:
        while True:
            try:
                ev = q.get_nowait()
            except queue.Empty:
                return
            if isinstance(ev, _Done):
                done.append(ev)
                continue
            ok, chunk = shape(ev)
            if ok:
                yield chunk

    def run_step() -> Iterator[Any]:
        todo = [t for t in loop.tasks.values() if not t.writes]
        results: list[tuple[Any, BaseException | None]] = []
        if len(todo) == 1:
            exc = run_task(make_scope(loop, todo[0]))
            loop.commit(todo[0], exc)
            results.append((todo[0], exc))
        elif todo:
            for task in todo:
                scope = make_scope(loop, task)
                fut = POOL.submit(contextvars.copy_context().run, run_task, scope)
                fut.add_done_callback(lambda f, s=scope: q.put(_Done(s, f)))
            remaining = len(todo)
            while remaining:
                if not done:
                    ev = q.get()
                    if isinstance(ev, _Done):
                        done.append(ev)
                    else:
                        ok, chunk = shape(ev)
                        if ok:
                            yield chunk
                    continue
                item = done.pop(0)
                remaining -= 1
                exc = item.result.result()
                loop.commit(item.scope.task, exc)
                results.append((item.scope.task, exc))
        _raise_step_errors(results)

    saved = opts.checkpointer.get_tuple(opts.checkpoint_config) if opts.checkpointer else None
    try:
        loop.start(saved)
        yield from drain()
        while loop.tick():
            _cache_lookup(loop)
            yield from run_step()
            _cache_store(loop)
            loop.after_tick()
            yield from drain()
    except BaseException as exc:
        suppress = loop.exit(exc)
        if opts.persister is not None:
            opts.persister.flush()
        yield from drain()
        if not suppress:
            _mark_parent_command(exc, loop)
            raise
    else:
        loop.exit(None)
        if opts.persister is not None:
            opts.persister.flush()
        yield from drain()
    if loop.status == "out_of_steps":
        raise _recursion_error(loop)


async def astream_run(
    graph: Any, input: Any, config: Any, kw: dict[str, Any]
) -> AsyncIterator[Any]:
    """The async driver behind :meth:`Pregel.astream`."""
    aq: asyncio.Queue[Any] = asyncio.Queue()
    aloop = asyncio.get_running_loop()
    owner = threading.get_ident()

    def put(ev: Any) -> None:
        if threading.get_ident() == owner:
            aq.put_nowait(ev)
        else:
            aloop.call_soon_threadsafe(aq.put_nowait, ev)

    loop, opts, stream_mode = prepare(graph, input, config, put, kw, AsyncPersister)
    subgraphs = bool(kw.get("subgraphs"))
    pending: list[Any] = []

    def drain() -> list[Any]:
        out = []
        while True:
            try:
                ev = aq.get_nowait()
            except asyncio.QueueEmpty:
                break
            if isinstance(ev, _Done):
                pending.append(ev)
                continue
            ok, chunk = shape_output(ev, stream_mode, subgraphs)
            if ok:
                out.append(chunk)
        return out

    saved = (
        await opts.checkpointer.aget_tuple(opts.checkpoint_config) if opts.checkpointer else None
    )
    try:
        loop.start(saved)
        for c in drain():
            yield c
        while loop.tick():
            _cache_lookup(loop)
            todo = [t for t in loop.tasks.values() if not t.writes]
            results: list[tuple[Any, BaseException | None]] = []
            if len(todo) == 1:
                exc = await arun_task(make_scope(loop, todo[0]))
                loop.commit(todo[0], exc)
                results.append((todo[0], exc))
            else:
                for task in todo:
                    scope = make_scope(loop, task)
                    t = aloop.create_task(arun_task(scope))
                    t.add_done_callback(lambda f, s=scope: aq.put_nowait(_Done(s, f)))
                remaining = len(todo)
                while remaining:
                    if not pending:
                        ev = await aq.get()
                        if isinstance(ev, _Done):
                            pending.append(ev)
                        else:
                            ok, chunk = shape_output(ev, stream_mode, subgraphs)
                            if ok:
                                yield chunk
                        continue
                    item = pending.pop(0)
                    remaining -= 1
                    exc = item.result.result()
                    loop.commit(item.scope.task, exc)
                    results.append((item.scope.task, exc))
                    if opts.persister is not None:
                        await opts.persister.throttle()
            if opts.persister is not None and opts.persister.inline:
                await opts.persister.flush()
            _raise_step_errors(results)
            _cache_store(loop)
            loop.after_tick()
            if opts.persister is not None:
                await opts.persister.throttle()
            for c in drain():
                yield c
    except BaseException as exc:
        suppress = loop.exit(exc)
        if opts.persister is not None:
            await opts.persister.flush()
        for c in drain():
            yield c
        if not suppress:
            _mark_parent_command(exc, loop)
            raise
    else:
        loop.exit(None)
        if opts.persister is not None:
            await opts.persister.flush()
        for c in drain():
            yield c
    if loop.status == "out_of_steps":
        raise _recursion_error(loop)

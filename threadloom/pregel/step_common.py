"""What both drivers (``driver.py``, ``adriver.py``) use around a step: the
done marker a finished task queues, the cache lookups, the step's errors,
the recursion error, the lone-task shortcut and the addressed-checkpoint check."""

from __future__ import annotations

import os
from typing import Any

from threadloom.constants import START
from threadloom.errors import (
    CheckpointNotFoundError,
    GraphInterrupt,
    GraphRecursionError,
    ParentCommand,
)
from threadloom.pregel.context import TaskScope
from threadloom.pregel.interrupts import as_interrupts
from threadloom.pregel.loop import Loop
from threadloom.pregel.parent_commands import merge_parent_commands
from threadloom.pregel.write import ChannelWrite
from threadloom.pregel.writes import CONTROL_WRITES

__all__ = [
    "Done",
    "cache_apply",
    "cache_keys",
    "cache_lookup",
    "cache_pairs",
    "cache_store",
    "cache_wanted",
    "latest_config",
    "lone_task",
    "max_concurrency",
    "raise_step_errors",
    "recursion_error",
    "require_addressed",
    "runs_user_code",
]


class Done:
    """A finished task, as queued to the driver by the pool or the event loop."""

    __slots__ = ("scope", "result")

    def __init__(self, scope: TaskScope, result: Any) -> None:
        self.scope = scope
        self.result = result


def runs_user_code(todo: list[Any]) -> bool:
    """True when a task of this step runs user code, so a held input checkpoint
    must be saved before it runs (a crash or a long call must not find the input
    stored nowhere, and ``get_state`` must see it meanwhile, as under LangGraph).

    Only a START task that is pure plumbing lets the input wait to ride with the
    step's save: inline functions and plain channel writes. A conditional edge
    from START (``add_conditional_edges(START, router)``) adds a branch writer
    that runs the user's routing function in that task, often for seconds."""
    for task in todo:
        if task.name != START:
            return True
        proc = task.proc
        for writer in proc.writers:
            if type(writer) is not ChannelWrite:
                return True
        for _fn, style in proc.steps:
            if not style[4]:
                return True
    return False


def cache_wanted(loop: Loop) -> list[Any]:
    """Tasks of this step that may have a cached result."""
    if loop.o.cache is None:
        return []
    return [t for t in loop.tasks.values() if t.cache_key is not None and not t.writes]


def cache_apply(loop: Loop, wanted: list[Any], found: dict[Any, Any]) -> None:
    """Give tasks with a cached result their writes (they are then not run)."""
    for t in wanted:
        hit = found.get((t.cache_key.ns, t.cache_key.key))
        if hit is not None:
            t.writes.extend(hit)
            loop.put_writes(t.id, t.writes, cached=True)


def cache_keys(wanted: list[Any]) -> list[Any]:
    return [(t.cache_key.ns, t.cache_key.key) for t in wanted]


def cache_lookup(loop: Loop) -> None:
    if wanted := cache_wanted(loop):
        cache_apply(loop, wanted, loop.o.cache.get(cache_keys(wanted)))


def cache_pairs(loop: Loop) -> dict[Any, Any]:
    """This step's successful tasks with a cache policy: ``{key: (writes, ttl)}``."""
    o = loop.o
    pairs = {
        (t.cache_key.ns, t.cache_key.key): (
            [w for w in t.writes if w[0] not in CONTROL_WRITES],
            t.cache_key.ttl,
        )
        for t in o.cache_writes
    }
    o.cache_writes.clear()
    return pairs


def cache_store(loop: Loop) -> None:
    if loop.o.cache is not None and loop.o.cache_writes:
        loop.o.cache.set(cache_pairs(loop))


def max_concurrency(config: Any) -> int:
    """Tasks of one step running at once: ``config["max_concurrency"]`` or, as
    LangGraph's default executor, ``min(32, cpus + 4)``."""
    limit = config.get("max_concurrency")
    return int(limit) if limit else _DEFAULT_CONCURRENCY


_DEFAULT_CONCURRENCY = min(32, (os.cpu_count() or 1) + 4)  # cpu_count() is a syscall: once


def raise_step_errors(results: list[tuple[Any, BaseException | None]]) -> None:
    """After every task of the step finished: the first error, else all interrupts."""
    interrupts: list[Any] = []
    for _task, exc in results:
        if exc is None:
            continue
        if isinstance(exc, GraphInterrupt):
            interrupts.append(exc)
        elif isinstance(exc, ParentCommand):
            raise merge_parent_commands(results)  # siblings' reports go up together
        else:
            raise exc
    if interrupts:
        raise GraphInterrupt(
            tuple(i for exc in interrupts for i in as_interrupts(exc.args[0] if exc.args else ()))
        )


def latest_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without its checkpoint id: addresses the thread's latest checkpoint."""
    conf = {k: v for k, v in config["configurable"].items() if k != "checkpoint_id"}
    return {**config, "configurable": conf}


def recursion_error(loop: Loop) -> GraphRecursionError:
    return GraphRecursionError(
        f"Recursion limit of {loop.o.run.recursion_limit} reached without hitting a stop "
        "condition. You can increase the limit by setting the `recursion_limit` config key."
    )


def lone_task(loop: Any) -> Any:
    """The step's one task left to run, when that is all there is and no step
    timeout applies (the usual step: both drivers then skip their general
    step machinery); else None."""
    if loop.graph.step_timeout:
        return None
    lone = None
    for task in loop.tasks.values():
        if not task.writes:
            if lone is not None:
                return None
            lone = task
    return lone


def require_addressed(loop: Loop, opts: Any, saved: Any) -> None:
    """An explicit ``checkpoint_id`` that names nothing is an error, not a fresh thread.

    LangGraph silently starts from an empty checkpoint (then fails with "no input"
    or runs the input on a blank state); the caller meant a checkpoint that is not there.
    """
    run = opts.run
    if saved is None and run.checkpoint_id and not loop.is_nested and opts.checkpointer is not None:
        raise CheckpointNotFoundError(str(run.thread_id), run.checkpoint_id, run.checkpoint_ns)

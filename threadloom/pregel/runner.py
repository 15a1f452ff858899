"""Running a task: call the node's functions, apply its writers, retry on failure.

Sync tasks run in the calling thread (a lone task) or on the shared pool;
async tasks run as asyncio tasks, with sync functions sent to the pool. The
task is published in :data:`~threadloom.pregel.context.CURRENT` while it runs,
which is how ``interrupt()``, ``get_config()`` and nested graphs find it.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import replace
from typing import Any

from threadloom.constants import NS_SEP
from threadloom.errors import GraphBubbleUp, ParentCommand
from threadloom.pregel.context import CURRENT, TaskScope
from threadloom.pregel.ids import recast_checkpoint_ns
from threadloom.pregel.io import command_writes
from threadloom.pregel.messages import aobserved, observed
from threadloom.pregel.node import Style
from threadloom.pregel.pool import POOL
from threadloom.pregel.timeouts import arun_timed, node_cancelled, sync_timeout_unsupported
from threadloom.pregel.write import ChannelWrite, assemble_writes
from threadloom.types import Command

__all__ = ["arun_task", "run_task", "retry_delay"]


def _kwargs(style: Style, scope: TaskScope) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if style[1]:
        kw["config"] = scope.config()
    if style[2]:
        kw["writer"] = scope.custom or (lambda _: None)
    return kw


def _finish(scope: TaskScope, value: Any) -> None:
    """Turn the node's output into writes (Command, or the node's writers)."""
    task = scope.task
    proc = task.proc
    if isinstance(value, Command) and proc.handle_command:
        if value.graph == Command.PARENT:
            raise ParentCommand(value)
        task.writes.extend(command_writes(value))
        return
    for writer in proc.writers:
        if type(writer) is ChannelWrite:
            if writer.writes:
                task.writes.extend(assemble_writes(writer.writes, value))
        else:
            value = writer(value)


async def _afinish(scope: TaskScope, value: Any) -> None:
    """Async twin of :func:`_finish`: a writer with an async form (a conditional
    edge: ``BranchWriter.acall``) is awaited here, so an async routing function runs
    on the caller's event loop and a cancel reaches it, as under LangGraph."""
    task = scope.task
    proc = task.proc
    if isinstance(value, Command) and proc.handle_command:
        _finish(scope, value)  # no writer runs
        return
    for writer in proc.writers:
        if type(writer) is ChannelWrite:
            if writer.writes:
                task.writes.extend(assemble_writes(writer.writes, value))
        elif (acall := getattr(writer, "acall", None)) is not None:
            value = await acall(value)
        else:
            value = writer(value)


def _for_this_task(scope: TaskScope, exc: BaseException) -> Command | None:
    """The Command of a ``ParentCommand`` to apply in this task, as LangGraph does.

    Addressed to this task's graph (its namespace, recast, or the node name): the
    Command goes through this task's writers. ``graph=PARENT``: re-addressed to the
    namespace of the graph that called ours, and left to bubble up (None).
    """
    if not isinstance(exc, ParentCommand):
        return None
    cmd = exc.args[0]
    ns = scope.task.checkpoint_ns
    if cmd.graph in (ns, recast_checkpoint_ns(ns), scope.task.name):
        return cmd
    if cmd.graph == Command.PARENT:
        parts = ns.split(NS_SEP)
        if parts[-1].isdigit():
            parts.pop()
        exc.args = (replace(cmd, graph=NS_SEP.join(parts[:-1])),)
    return None


def _parent_command(scope: TaskScope, exc: BaseException) -> bool:
    """Apply a ``ParentCommand`` addressed to this task; True when it was applied."""
    cmd = _for_this_task(scope, exc)
    if cmd is None:
        return False
    _finish(scope, cmd)
    return True


async def _aparent_command(scope: TaskScope, exc: BaseException) -> bool:
    """Async twin of :func:`_parent_command`."""
    cmd = _for_this_task(scope, exc)
    if cmd is None:
        return False
    await _afinish(scope, cmd)
    return True


def retry_delay(scope: TaskScope, exc: BaseException, attempt: int) -> float | None:
    """Seconds to wait before retrying after ``exc`` (None: do not retry)."""
    if isinstance(exc, GraphBubbleUp):
        return None
    for policy in scope.task.retry_policy or ():
        if policy.should_retry(exc):  # type: ignore[arg-type]
            return policy.delay(attempt) if attempt < policy.max_attempts else None
    return None


def _steps_then_writes(scope: TaskScope) -> Any:
    value = _call_steps(scope)
    _finish(scope, value)
    return value


def _call_steps(scope: TaskScope) -> Any:
    task = scope.task
    value = task.input
    for fn, style in task.proc.steps:
        if style[3]:
            if task.timeout is not None:  # as LangGraph: a timed node needs an async run
                raise sync_timeout_unsupported(task.name)
            value = fn.invoke(value, scope.config())
        elif style[0]:
            if task.timeout is not None:
                raise sync_timeout_unsupported(task.name)
            raise TypeError(f"node {task.name!r} is async; run the graph with ainvoke/astream")
        elif style[1] or style[2]:
            value = fn(value, **_kwargs(style, scope))
        else:
            value = fn(value)
    return value


def _note(scope: TaskScope, exc: BaseException) -> None:
    """Name the failing task on the exception (``__notes__``, as LangGraph): in a
    fan-out or a subgraph the traceback alone does not say which task it was;
    each enclosing task adds its own line."""
    if isinstance(exc, Exception) and not isinstance(exc, GraphBubbleUp):
        add_note = getattr(exc, "add_note", None)  # (Python 3.11+)
        if add_note is not None:
            add_note(f"During task with name '{scope.task.name}' and id '{scope.task.id}'")


def run_task(scope: TaskScope) -> BaseException | None:
    """Run a task to completion (with retries); return its exception instead of raising."""
    token = CURRENT.set(scope)
    scope.first_attempt_time = time.time()
    try:
        attempt = 0
        while True:
            try:
                # LangChain callbacks or a "messages" stream (a router's model call too)
                if scope.run.config.get("callbacks"):
                    observed(scope, lambda: _steps_then_writes(scope))
                else:
                    _finish(scope, _call_steps(scope))
                return None
            except BaseException as exc:
                if _parent_command(scope, exc):
                    return None
                _note(scope, exc)
                attempt += 1
                delay = retry_delay(scope, exc, attempt)
                if delay is None:
                    return exc
                scope.task.writes.clear()
                scope.task.scratchpad.restart()
                scope.attempt = attempt + 1
                time.sleep(delay)
    finally:
        CURRENT.reset(token)


async def _arun_once(scope: TaskScope) -> None:
    if scope.run.config.get("callbacks"):
        await aobserved(scope, lambda: _asteps_then_writes(scope))
    else:
        await _afinish(scope, await _acall_steps(scope))


async def _asteps_then_writes(scope: TaskScope) -> Any:
    value = await _acall_steps(scope)
    await _afinish(scope, value)
    return value


async def _acall_steps(scope: TaskScope) -> Any:
    task = scope.task
    value = task.input
    loop = asyncio.get_running_loop()
    for fn, style in task.proc.steps:
        if style[3]:
            value = await fn.ainvoke(value, scope.config())
        elif style[0]:
            value = await fn(value, **_kwargs(style, scope))
        elif style[4] and not (style[1] or style[2]):
            value = fn(value)  # internal plumbing (node.runs_inline): no thread hop
        else:
            ctx = contextvars.copy_context()
            value = await POOL.run_async(
                loop, lambda f=fn, v=value, s=style, c=ctx: c.run(f, v, **_kwargs(s, scope))
            )
    return value


async def arun_task(scope: TaskScope) -> BaseException | None:
    """Async twin of :func:`run_task`."""
    token = CURRENT.set(scope)
    scope.first_attempt_time = time.time()
    try:
        attempt = 0
        while True:
            try:
                if scope.task.timeout is None:
                    await _arun_once(scope)
                else:
                    await arun_timed(scope, scope.task.timeout, _acall_steps, _afinish)
                return None
            except BaseException as exc:
                if await _aparent_command(scope, exc):
                    return None
                if isinstance(exc, asyncio.CancelledError):
                    if (own := node_cancelled(scope.task.name)) is None:
                        raise
                    return own  # the node raised it itself: its failure (not retried)
                _note(scope, exc)
                attempt += 1
                delay = retry_delay(scope, exc, attempt)
                if delay is None:
                    return exc
                scope.task.writes.clear()
                scope.task.scratchpad.restart()
                scope.attempt = attempt + 1
                await asyncio.sleep(delay)
    finally:
        CURRENT.reset(token)

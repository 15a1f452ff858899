"""Per-attempt node timeouts: ``add_node(..., timeout=TimeoutPolicy(...))``.

An attempt of a timed node runs as its own asyncio task, raced against a
watchdog per limit: ``run_timeout`` (wall clock, never refreshed) and
``idle_timeout`` (refreshed by progress). When a watchdog wins, the attempt is
cancelled and abandoned (cancellation is cooperative: a node that ignores it
keeps running, but it can no longer write, stream or emit custom chunks), its
writes are dropped and :class:`~threadloom.errors.NodeTimeoutError` goes to the
runner, whose retry policy decides on a retry, as in LangGraph.

Progress, under ``refresh_on="auto"``: ``runtime.heartbeat()``, custom stream
chunks (``writer``/``runtime.stream_writer``/``get_stream_writer()``), a
subgraph's task starts and ends and the events it streams up, and LangChain
callback events of runs inside the node (when ``langchain_core`` is loaded). Under ``"heartbeat"``: only
``runtime.heartbeat()``. Nodes without a timeout never reach this module.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from threadloom.errors import InvalidGraphError, NodeCancelledError, NodeTimeoutError
from threadloom.pregel.context import CURRENT, TaskScope
from threadloom.pregel.stream import StreamSink
from threadloom.types import TimeoutPolicy

__all__ = ["arun_timed", "node_cancelled", "sync_timeout_unsupported", "check_timeout_supported"]

_SYNC = (
    "Node timeouts are only supported for async nodes because sync Python "
    "execution cannot be safely cancelled in-process."
)


def sync_timeout_unsupported(name: str) -> InvalidGraphError:
    """LangGraph's refusal of a timeout on a sync node (a ValueError there too)."""
    return InvalidGraphError(f"{_SYNC} Node {name!r} is sync.")


def check_timeout_supported(name: str, node: Any) -> None:
    """Refuse a timeout on a node whose work is not all async (at compile, as LangGraph):
    a sync function on a worker thread cannot be cancelled, so the limit would
    report a timeout while the work went on writing nothing anyone waits for."""
    if node.timeout is None:
        return
    for fn, style in node.steps:
        is_async, has_invoke, inline = style[0], style[3], style[4]
        if not (is_async or inline or (has_invoke and _native_async(fn))):
            raise sync_timeout_unsupported(name)


def _native_async(runnable: Any) -> bool:
    """Whether a runnable's ``ainvoke`` is its own async work, LangGraph's rule: a
    LangChain runnable inherits an ``ainvoke`` that runs ``invoke`` on a thread
    (a sync ``RunnableLambda`` too), so bindings, sequences and parallels are
    looked through, a lambda needs an async function, any other runnable an
    ``ainvoke`` of its own. Without LangChain loaded only threadloom's own
    runnables (compiled graphs, natively async) can be here."""
    core = sys.modules.get("langchain_core.runnables")
    if core is None or not isinstance(runnable, core.Runnable):
        return hasattr(runnable, "ainvoke")
    from langchain_core.runnables.base import RunnableBindingBase

    while isinstance(runnable, RunnableBindingBase):
        runnable = runnable.bound
    if isinstance(runnable, core.RunnableSequence):
        return all(_native_async(step) for step in runnable.steps)
    if isinstance(runnable, core.RunnableParallel):
        return all(_native_async(step) for step in runnable.steps__.values())
    if isinstance(runnable, core.RunnableLambda):
        return bool(getattr(runnable, "afunc", None))
    return getattr(type(runnable), "ainvoke", None) is not core.Runnable.ainvoke


def node_cancelled(name: str) -> NodeCancelledError | None:
    """A NodeCancelledError when the CancelledError just caught was raised by the
    node's own code (nobody asked this task to cancel: ``cancelling() == 0``),
    else None (a real cancel, which must propagate)."""
    if sys.version_info < (3, 11):
        return None
    current = asyncio.current_task()
    if current is None or current.cancelling():
        return None
    return NodeCancelledError(name)


class _Attempt:
    """One timed attempt: whether it may still write, and when it last made progress."""

    __slots__ = ("active", "last", "auto")

    def __init__(self, auto: bool) -> None:
        self.active = True
        self.last = time.monotonic()
        self.auto = auto

    def touch(self) -> None:
        self.last = time.monotonic()

    def progress(self) -> None:
        if self.auto:
            self.last = time.monotonic()

    async def idle(self, seconds: float) -> None:
        while (remaining := self.last + seconds - time.monotonic()) > 0:
            await asyncio.sleep(remaining)


async def arun_timed(
    scope: TaskScope,
    policy: TimeoutPolicy,
    call_steps: Callable[[TaskScope], Awaitable[Any]],
    finish: Callable[[TaskScope, Any], Awaitable[None]],
) -> None:
    """Run one attempt of ``scope``'s task under ``policy``.

    Raises:
        NodeTimeoutError: a limit fired first (the attempt's writes are dropped).
        asyncio.CancelledError: the node's own code raised it (the runner turns it
            into NodeCancelledError, never retried, as for an untimed node), or
            the run was cancelled.
    """
    idle, run = policy.idle_timeout, policy.run_timeout
    attempt = _Attempt(idle is not None and policy.refresh_on == "auto")
    guarded = _guard(scope, attempt)
    bg = asyncio.ensure_future(_body(guarded, attempt, idle is not None, call_steps, finish))
    dogs: dict[asyncio.Future[Any], str] = {}
    if idle is not None:
        dogs[asyncio.ensure_future(attempt.idle(float(idle)))] = "idle"
    if run is not None:
        dogs[asyncio.ensure_future(asyncio.sleep(float(run)))] = "run"
    start = time.monotonic()
    try:
        done, _ = await asyncio.wait({bg, *dogs}, return_when=asyncio.FIRST_COMPLETED)
        if bg in done:
            if bg.cancelled():  # the node raised CancelledError itself: the runner
                raise asyncio.CancelledError  # decides, as for an untimed node
            return bg.result()
        kind = "run" if any(dogs[d] == "run" for d in done) else "idle"
        attempt.active = False
        scope.task.writes.clear()
        _abandon(bg)
        raise NodeTimeoutError(
            scope.task.name,
            time.monotonic() - start,
            kind=kind,  # type: ignore[arg-type]
            idle_timeout=float(idle) if idle is not None else None,
            run_timeout=float(run) if run is not None else None,
        )
    except asyncio.CancelledError:
        attempt.active = False
        _abandon(bg)
        raise
    finally:
        attempt.active = False
        for dog in dogs:
            dog.cancel()


def _abandon(bg: asyncio.Future[Any]) -> None:
    """Cancel the attempt and never wait for it (as LangGraph: a node that ignores
    the cancel must not hold up the run); its outcome is read so asyncio does not
    log it as never retrieved."""
    bg.cancel()
    bg.add_done_callback(lambda f: f.cancelled() or f.exception())


async def _body(
    scope: TaskScope,
    attempt: _Attempt,
    heartbeat: bool,
    call_steps: Callable[[TaskScope], Awaitable[Any]],
    finish: Callable[[TaskScope, Any], Awaitable[None]],
) -> Any:
    """The attempt itself, in its own task (so its own context): the guarded scope
    (published as the current task), the heartbeat and LangChain's current config
    set here stay with this attempt, even once it is abandoned and a retry runs."""
    from threadloom.graph.runtime import HEARTBEAT
    from threadloom.pregel.messages import _inheriting, aobserved, child_config_var

    CURRENT.set(scope)
    if heartbeat:
        HEARTBEAT.set(attempt.touch)
    observed = bool(scope.run.config.get("callbacks"))
    if attempt.auto and not observed and (var := child_config_var()) is not None:
        var.set(_inheriting(scope.config()))  # a model called without config reports here

    async def steps() -> Any:
        value = await call_steps(scope)
        if attempt.active:  # a cancelled attempt that carried on writes nothing
            await finish(scope, value)
        return value

    return await (aobserved(scope, steps) if observed else steps())


def _guard(scope: TaskScope, attempt: _Attempt) -> TaskScope:
    """A copy of ``scope`` for this attempt alone, whose custom writer, child stream
    and config (with its ``__pregel_scope``) are guarded: everything the attempt
    reaches (``get_stream_writer()``, a subgraph it runs, its runtime) goes through
    them, so once it is abandoned it can no longer write or stream, however long
    it carries on. The shared scope is never touched (a retry runs on it)."""
    custom = scope.custom

    def guarded_custom(chunk: Any) -> None:
        if attempt.active:
            attempt.progress()
            if custom is not None:
                custom(chunk)

    guarded = replace(scope, custom=guarded_custom, _config=None)
    sink: StreamSink | None = scope.stream
    if sink is not None or attempt.auto:
        # under "auto" a subgraph's task starts and ends count, as LangGraph's
        # callback events for them: ask it for "tasks" events, passing on only
        # what the real sink wants
        wanted = sink.modes if sink is not None else frozenset()
        modes = wanted | {"tasks"} if attempt.auto else wanted

        def guarded_put(event: Any) -> None:
            if attempt.active:
                attempt.progress()
                if event[1] in wanted:
                    sink.put(event)  # type: ignore[union-attr]

        guarded.stream = StreamSink(modes, guarded_put, sink.results if sink else False)
    if attempt.auto and (handler := _callback_handler(attempt)) is not None:
        from threadloom.pregel.messages import with_stream

        config = guarded.config()
        guarded._config = {**config, "callbacks": with_stream(config.get("callbacks"), handler)}
    return guarded


_HANDLER: list[type] = []

_EVENTS = (
    "on_llm_start on_chat_model_start on_llm_new_token on_llm_end on_llm_error "
    "on_chain_start on_chain_end on_chain_error on_tool_start on_tool_end on_tool_error "
    "on_retriever_start on_retriever_end on_retriever_error on_agent_action "
    "on_agent_finish on_text on_retry on_custom_event"
).split()


def _callback_handler(attempt: _Attempt) -> Any:
    """A LangChain handler counting every callback event of the node's runs as
    progress, or None when LangChain is not loaded (nothing could emit them)."""
    if "langchain_core.callbacks" not in sys.modules:
        return None
    if not _HANDLER:
        from langchain_core.callbacks import BaseCallbackHandler

        def touch(self: Any, *args: Any, **kwargs: Any) -> None:
            self.attempt.progress()

        attrs: dict[str, Any] = {"run_inline": True, **dict.fromkeys(_EVENTS, touch)}
        _HANDLER.append(type("IdleProgressHandler", (BaseCallbackHandler,), attrs))
    handler = _HANDLER[0]()
    handler.attempt = attempt
    return handler

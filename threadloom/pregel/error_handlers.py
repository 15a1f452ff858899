"""Node error handlers (``add_node(..., error_handler=)``), with LangGraph 1.2's semantics.

When a task whose node has a handler fails (any exception but a control-flow
signal), its commit stores ``(ERROR, exc)`` and ``(ERROR_SOURCE_NODE, node)``;
a handler task is then made in the same step and the drivers run it once the
step's other tasks are done (all at once, within the step's ``step_timeout``),
before deciding whether the step failed. The handler gets the failed task's
input and a :class:`~threadloom.errors.NodeError`; what it returns (an update,
a ``Command``) is written like any node's output, and the failed node's own
edges are not followed. The run fails only if the
handler fails (a handler's failure is never handled).

Resuming a step whose writes hold an ``ERROR_SOURCE_NODE`` marker (the process
stopped between the failure and the end of the step) marks the failed task done
and runs its handler again instead of the node, as LangGraph does.

Nothing here runs unless a task failed or a resumed step holds a marker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.constants import ERROR, ERROR_SOURCE_NODE, NS_SEP, PUSH
from threadloom.errors import GraphBubbleUp, NodeError
from threadloom.pregel.tasks import PUSH_TRIGGER, _executable

__all__ = ["handler_task", "resume_handlers", "unhandled"]

Results = list[tuple[Any, BaseException | None]]


def handler_task(loop: Any, failed: Any, error: BaseException) -> Any:
    """The handler task for ``failed`` (None if its handler node is gone), added to the step."""
    name = failed.proc.error_handler_node
    proc = loop.graph.nodes.get(name)
    plan = loop._plan
    if proc is None or plan is None:
        return None
    # LangGraph nests the handler under the FAILED task's namespace
    # (``bad:<failed id>|__error_handler__bad``), not the step's: the id, the
    # namespace and the ids of interrupts raised in the handler all follow from it,
    # so a thread paused in a handler resumes by interrupt id across the two.
    parent_ns = failed.checkpoint_ns
    node_ns = f"{parent_ns}{NS_SEP}{name}" if parent_ns else name
    tid = plan.id_fn(
        plan.id_bytes, node_ns, str(plan.step), name, PUSH, "node_error_handler", failed.id
    )
    path = (*failed.path[:3], "node_error_handler", False)
    task = _executable(plan, proc, name, failed.input, tid, path, PUSH_TRIGGER, node_ns)
    checkpoint_id = plan.checkpoint_map.get(plan.parent_ns)
    if checkpoint_id is not None:  # as LangGraph's handler config: the failed ns maps too
        task.checkpoint_map = {**plan.checkpoint_map, parent_ns: checkpoint_id}
    task.extra = {"node_error": NodeError(node=failed.name, error=error)}
    loop.tasks[task.id] = task
    return task


def resume_handlers(loop: Any, writes: Sequence[tuple[str, str, Any]]) -> None:
    """On resume: a task of this step that failed and was routed to its handler
    counts as done (it is not run again); its handler runs in this step."""
    errors = {tid: value for tid, chan, value in writes if chan == ERROR}
    for tid, chan, _ in writes:
        task = loop.tasks.get(tid)
        if chan != ERROR_SOURCE_NODE or tid not in errors or task is None:
            continue
        if task.proc.error_handler_node is None:
            continue
        task.writes.append((ERROR, errors[tid]))
        handler_task(loop, task, errors[tid])


def unhandled(results: Results) -> Results:
    """The step's outcomes without the failures a handler took over."""
    return [
        (task, exc)
        for task, exc in results
        if exc is None or isinstance(exc, GraphBubbleUp) or task.proc.error_handler_node is None
    ]


def run_handlers(loop: Any, results: Results, save: Any, run_batch: Any) -> Results:
    """Sync drivers: run the handlers this step's failures made (after saving the
    failures' writes, so a crash in between resumes into the handler); the step's
    outcomes a failure is then judged on.

    ``run_batch(tasks)`` runs the handlers at once, as LangGraph's runner does
    (one slow handler does not hold up the others), under the step's timeout,
    and returns their outcomes in the order given: commits stay deterministic."""
    while loop.error_handlers:
        handlers, loop.error_handlers = loop.error_handlers, []
        save()
        for task, exc in zip(handlers, run_batch(handlers)):
            loop.commit(task, exc)
            results.append((task, exc))
    return unhandled(results)


async def arun_handlers(loop: Any, results: Results, persister: Any, run_batch: Any) -> Results:
    """Async twin of :func:`run_handlers` (``run_batch`` is a coroutine function)."""
    while loop.error_handlers:
        handlers, loop.error_handlers = loop.error_handlers, []
        if persister is not None:
            persister.save_writes()
            await persister.throttle()
        for task, exc in zip(handlers, await run_batch(handlers)):
            loop.commit(task, exc)
            results.append((task, exc))
    return unhandled(results)

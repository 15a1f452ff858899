"""``interrupt()``: pause the running node until the thread is resumed with an answer."""

from __future__ import annotations

from typing import Any

from threadloom.constants import RESUME
from threadloom.errors import GraphInterrupt
from threadloom.pregel.context import current_task_or_raise
from threadloom.pregel.ids import interrupt_id
from threadloom.types import Interrupt

__all__ = ["interrupt"]


def interrupt(value: Any) -> Any:
    """Return the answer for this interrupt, or raise :class:`GraphInterrupt` to ask for one.

    The n-th ``interrupt()`` of a task takes the n-th resume answer. Answers
    already used are recorded as the task's ``__resume__`` write, so when the
    node re-runs from its start the earlier calls return the same values.

    Raises:
        GraphInterrupt: no answer yet; carries ``Interrupt(value, id)``.
        RuntimeError: called outside a running node.
    """
    scope = current_task_or_raise()
    scratchpad = scope.task.scratchpad
    idx = scratchpad.interrupt_counter()
    if scratchpad.resume and idx < len(scratchpad.resume):
        _record(scope, scratchpad.resume[: idx + 1])
        return scratchpad.resume[idx]
    answer = scratchpad.get_null_resume(True)
    if answer is not None:
        scratchpad.resume.append(answer)
        _record(scope, list(scratchpad.resume))
        return answer
    raise GraphInterrupt(
        (Interrupt(value=value, id=interrupt_id(scope.task.checkpoint_ns, len(scratchpad.resume))),)
    )


def _record(scope: Any, answers: list[Any]) -> None:
    """Keep one ``__resume__`` write per task: the answers used so far (last wins)."""
    writes = scope.task.writes
    writes[:] = [w for w in writes if w[0] != RESUME]
    writes.append((RESUME, answers))


def with_task_ids(interrupts: Any, checkpoint_ns: str) -> tuple[Interrupt, ...]:
    """Interrupts raised by hand (``GraphInterrupt(value)``) get the task's stable id.

    ``interrupt()`` already ids its own; a node raising ``GraphInterrupt`` or
    ``NodeInterrupt`` directly leaves a placeholder, which could not be resumed by id.
    """
    return tuple(
        Interrupt(value=i.value, id=interrupt_id(checkpoint_ns, 0))
        if isinstance(i, Interrupt) and i.id == _PLACEHOLDER_ID
        else i
        for i in interrupts
    )


_PLACEHOLDER_ID = Interrupt(value=None).id


def as_interrupts(value: Any) -> tuple[Interrupt, ...]:
    """Read an ``__interrupt__`` write the way its author meant it.

    ``interrupt()`` stores a tuple of :class:`Interrupt`. A node that raises
    ``GraphInterrupt("stop")`` by hand stores the bare value, and LangGraph then
    iterates it into one interrupt per character. Here a bare value (a string
    above all) is one interrupt; a list of bare values is one interrupt each.
    The stored write is left exactly as LangGraph writes it.
    """
    if value is None:
        return ()
    if isinstance(value, Interrupt):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(v if isinstance(v, Interrupt) else Interrupt(value=v) for v in value)
    return (Interrupt(value=value),)

"""``interrupt()``: pause the running node until the thread is resumed with an answer."""

from __future__ import annotations

from typing import Any

from threadloom.constants import RESUME
from threadloom.errors import GraphInterrupt, mark_invalid_resume
from threadloom.pregel.context import current_task_or_raise
from threadloom.pregel.ids import interrupt_id
from threadloom.types import Interrupt

__all__ = ["interrupt"]


def interrupt(value: Any, *, response_schema: Any = None) -> Any:
    """Return the answer for this interrupt, or raise :class:`GraphInterrupt` to ask for one.

    The n-th ``interrupt()`` of a task takes the n-th resume answer. Answers
    already used are recorded as the task's ``__resume__`` write, so when the
    node re-runs from its start the earlier calls return the same values. An
    answer is validated (when ``response_schema`` is a type) before it is
    recorded, so a wrong one leaves nothing behind but the node's error.

    Raises:
        GraphInterrupt: no answer yet; carries ``Interrupt(value, id, response_schema)``.
        pydantic.ValidationError: the answer does not match ``response_schema``.
        RuntimeError: called outside a running node.
    """
    scope = current_task_or_raise()
    adapter = _adapter(response_schema)
    scratchpad = scope.task.scratchpad
    idx = scratchpad.interrupt_counter()
    if scratchpad.resume and idx < len(scratchpad.resume):
        answer = _validated(adapter, scratchpad.resume[idx])
        _record(scope, scratchpad.resume[: idx + 1])
        return answer
    answer = scratchpad.get_null_resume(True)
    if answer is not None:
        validated = _validated(adapter, answer)
        scratchpad.resume.append(answer)
        _record(scope, list(scratchpad.resume))
        return validated
    schema = adapter.json_schema() if adapter is not None else response_schema
    raise GraphInterrupt(
        (
            Interrupt(
                value=value,
                id=interrupt_id(scope.task.checkpoint_ns, len(scratchpad.resume)),
                response_schema=schema,
            ),
        )
    )


def _adapter(response_schema: Any) -> Any:
    """A pydantic TypeAdapter for a schema given as a type; None for none or a
    JSON Schema dict (shown to clients as is, answers not validated)."""
    if response_schema is None or isinstance(response_schema, dict):
        return None
    try:
        from pydantic import TypeAdapter
    except ImportError as exc:  # pragma: no cover - pydantic ships with the [all] extra
        raise ImportError(
            "interrupt(response_schema=<a type>) needs pydantic; pass a JSON Schema "
            "dict, or install pydantic"
        ) from exc
    return TypeAdapter(response_schema)


def _validated(adapter: Any, answer: Any) -> Any:
    """``answer`` checked against the schema; a wrong one is tagged as an invalid
    resume (``errors.is_invalid_resume``) before it propagates."""
    if adapter is None:
        return answer
    from pydantic import ValidationError

    try:
        return adapter.validate_python(answer)
    except ValidationError as exc:
        mark_invalid_resume(exc)
        raise


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

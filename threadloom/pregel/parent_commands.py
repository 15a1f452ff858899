"""Several tasks of one step sending ``Command(graph=Command.PARENT, ...)``.

Each such task stops with a ``ParentCommand`` that bubbles up to the calling
graph. LangGraph raises the first one and drops the rest, so in a fan-out of
``Send`` workers that each report to the parent only one report arrives, with
no error (probe5). Here the step's parent commands are merged into one: the
updates in task order (the parent's reducers combine them, and two writes to a
plain value fail there as any two parallel writes do), the gotos together.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from threadloom.errors import InvalidUpdateError, ParentCommand
from threadloom.pregel.ids import task_path_str
from threadloom.types import Command

__all__ = ["merge_parent_commands"]


def merge_parent_commands(results: list[tuple[Any, BaseException | None]]) -> ParentCommand:
    """One ``ParentCommand`` for all of ``results``' parent commands addressed to
    the same graph as the first one.

    Raises:
        InvalidUpdateError: two of them carry a ``resume`` value.
    """
    found = [(t, e) for t, e in results if isinstance(e, ParentCommand)]
    if len(found) > 1:  # task order, as writes are applied (results come as tasks finish)
        found.sort(key=lambda item: task_path_str(getattr(item[0], "path", ())))
    first: Command = found[0][1].args[0]
    same = [(t, e.args[0]) for t, e in found if e.args[0].graph == first.graph]
    if len(same) == 1:
        return found[0][1]
    resumes = [(t, c) for t, c in same if c.resume is not None]
    if len(resumes) > 1:
        names = ", ".join(repr(getattr(t, "name", t)) for t, _ in resumes)
        raise InvalidUpdateError(
            f"tasks {names} each sent Command(graph=Command.PARENT, resume=...) in one step: "
            "the parent can take one resume value"
        )
    update: list[tuple[str, Any]] = []
    goto: list[Any] = []
    for _task, cmd in same:
        update.extend(cmd._update_as_tuples())
        if cmd.goto:
            goto.extend(cmd.goto if isinstance(cmd.goto, (list, tuple)) else [cmd.goto])
    merged = dataclasses.replace(
        first,
        update=update or None,
        goto=goto,
        resume=resumes[0][1].resume if resumes else None,
    )
    return ParentCommand(merged)

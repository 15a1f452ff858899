"""Events a loop emits: ``values``, ``updates`` (incl. interrupts), ``tasks`` and
``checkpoints`` (and their ``debug`` wrappers). Shapes are LangGraph's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.constants import ERROR, INTERRUPT, PUSH, TAG_HIDDEN
from threadloom.pregel.debug import map_debug_checkpoint, map_debug_task_results
from threadloom.pregel.interrupts import as_interrupts
from threadloom.pregel.io import (
    map_output_updates,
    map_output_values,
    read_channel,
    read_channels,
)

__all__ = [
    "InvokeResult",
    "emit_checkpoint",
    "emit_step_values",
    "emit_task_writes",
    "emit_values",
]


def emit_checkpoint(loop: Any) -> None:
    """``checkpoints`` event for the checkpoint the next step starts from (with a saver)."""
    o = loop.o
    if o.checkpointer is None or not o.emitter.checkpoints:
        return
    cfg = loop.checkpoint_config
    cfg = {**cfg, "configurable": {**cfg["configurable"], "checkpoint_id": loop.checkpoint["id"]}}
    o.emitter.emit(
        "checkpoints",
        map_debug_checkpoint(
            cfg,
            loop.channels,
            loop.graph.stream_channels_asis,
            loop.checkpoint_metadata,
            list(loop.tasks.values()),
            loop.pending_writes,
            loop.prev_checkpoint_config,
            o.output_keys,
        ),
        loop.step,
    )


def emit_values(loop: Any, writes: Any) -> None:
    """``values`` event (``writes=True``: unconditionally)."""
    if loop.o.emitter.values:
        loop.o.emitter.emit(
            "values", map_output_values(loop.o.output_keys, writes, loop.channels), loop.step
        )


def emit_step_values(loop: Any, tasks: Any) -> None:
    """``values`` event after a step whose ``tasks`` wrote an output channel:
    ``emit_values(loop, <their writes>)`` without listing the writes."""
    o = loop.o
    keys = o.output_keys
    single = isinstance(keys, str)
    for task in tasks:
        for c, _ in task.writes:
            if (c == keys) if single else (c in keys):
                channels = loop.channels
                value = read_channel(channels, keys) if single else read_channels(channels, keys)
                o.emitter.emit("values", (value,), loop.step)
                return


def emit_task_writes(
    loop: Any, task: Any, writes: Sequence[tuple[str, Any]], cached: bool = False
) -> None:
    """``updates``/``values`` for an interrupt, ``updates`` and ``tasks`` for a result."""
    emitter = loop.o.emitter
    if not emitter.modes or TAG_HIDDEN in task.proc.tags:
        return
    if writes[0][0] == INTERRUPT:
        if task.path[0] == PUSH and task.path[-1] is True:
            return  # a functional call: its caller reports it
        interrupts = tuple(v for w in writes if w[0] == INTERRUPT for v in as_interrupts(w[1]))
        emitter.emit("updates", [{INTERRUPT: interrupts}], loop.step)
        if "values" in emitter.modes:
            current = read_channels(loop.channels, loop.o.output_keys)
            if isinstance(current, dict):
                current[INTERRUPT] = interrupts
                emitter.emit("values", [current], loop.step)
            else:
                emitter.emit("values", [{INTERRUPT: interrupts}], loop.step)
    elif writes[0][0] != ERROR and emitter.results:
        emitter.emit(
            "updates", map_output_updates(loop.o.output_keys, [(task, writes)], cached), loop.step
        )
    if not cached and emitter.tasks:
        emitter.emit(
            "tasks",
            map_debug_task_results(task, writes, loop.graph.stream_channels_asis),
            loop.step,
        )


class InvokeResult:
    """What ``invoke``/``ainvoke`` return, folded from their ``updates`` + ``values`` chunks:
    the last values, with every interrupt of the run under ``__interrupt__``."""

    __slots__ = ("latest", "interrupts")

    def __init__(self) -> None:
        self.latest: Any = None
        self.interrupts: list[Any] = []

    def add(self, chunk: tuple[Any, ...]) -> None:
        mode, payload = chunk[-2], chunk[-1]
        if mode == "updates" and isinstance(payload, dict):
            if (ints := payload.get(INTERRUPT)) is not None:
                self.interrupts.extend(ints)
        elif mode == "values":
            self.latest = payload

    def result(self) -> Any:
        if not self.interrupts:
            return self.latest
        if isinstance(self.latest, dict):
            return {**self.latest, INTERRUPT: self.interrupts}
        return {INTERRUPT: self.interrupts}

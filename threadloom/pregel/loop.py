"""The superstep loop's state machine (LangGraph's ``PregelLoop``), without I/O.

``Loop`` owns the checkpoint, channels and pending writes of one run of one
graph. The sync and async drivers (``driver.py``) call, in order:
``start(saved)`` -> ``tick()`` -> run tasks, ``commit()`` each -> ``after_tick()``
-> ... -> ``exit(exc)``. What a save holds and when one is made is ``saving.py``
(the :class:`~threadloom.pregel.saving.Saving` mixin); saves are handed to a
persister (``persist.py``), events to an :class:`~threadloom.pregel.stream.Emitter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID, uuid5

from threadloom.channels.delta_fill import store_filled
from threadloom.checkpoint.base import WRITES_IDX_MAP, empty_checkpoint
from threadloom.checkpoint.ids import next_version
from threadloom.checkpoint.saver import BaseCheckpointSaver
from threadloom.constants import (
    ERROR,
    ERROR_SOURCE_NODE,
    INPUT,
    INTERRUPT,
    NO_WRITES,
    NULL_TASK_ID,
    RESUME,
    TASKS,
)
from threadloom.errors import GraphBubbleUp, GraphDrained, GraphInterrupt
from threadloom.pregel.checkpoint import migrate_checkpoint, run_channels
from threadloom.pregel.debug import map_debug_tasks
from threadloom.pregel.ids import task_path_str
from threadloom.pregel.io import read_channels
from threadloom.pregel.output import (
    emit_checkpoint,
    emit_step_values,
    emit_task_writes,
    emit_values,
)
from threadloom.pregel.saving import Saving
from threadloom.pregel.start import start_run
from threadloom.pregel.tasks import plan_tasks, renew_plan, run_plan, should_interrupt
from threadloom.pregel.writes import (
    CONTROL_WRITES,
    apply_writes,
    increment,
    read_task_statuses,
)
from threadloom.types import Send

__all__ = ["Loop"]


def _version_fn(saver: Any) -> Any:
    """The saver's ``get_next_version``; ``ids.next_version`` itself when the saver
    keeps the default (no method layers per changed channel per step)."""
    if saver is None:
        return increment
    fn = saver.get_next_version
    if getattr(fn, "__func__", None) is BaseCheckpointSaver.get_next_version:
        return next_version
    return fn


class Loop(Saving):
    """One run of one graph: checkpoint + channels + pending writes, step by step."""

    def __init__(self, graph: Any, input: Any, opts: Any) -> None:
        self.graph = graph
        self.input = input
        self.o = opts  # RunOptions (driver.py): run ctx, checkpointer, persister, emitter...
        run = opts.run
        self.is_nested = run.parent is not None
        self.ns = run.checkpoint_ns
        self.next_version = _version_fn(opts.checkpointer)
        self.untracked: set[str] = set()  # UntrackedValue channels (set by start)
        self.tasks: dict[str, Any] = {}
        self.status = "input"
        self.output: Any = None
        self.resuming_flag: bool | None = opts.parent_resuming
        self.resume_map: dict[str, Any] | None = opts.parent_resume_map
        self.written_task_ids: set[str] = set()
        self.updated_channels: set[str] | None = None
        self.is_replaying = False
        self.superseded = False  # an addressed checkpoint that is no longer the latest
        self.replay: Any = opts.replay  # ReplayState while the root replays (time travel)
        self._wcfg: tuple[str, Any, dict[str, Any]] | None = None  # _writes_config's cache
        self._plan: Any = None  # tasks.run_plan: the planning state kept across steps
        self.error_handlers: list[Any] = []  # handler tasks a failure made, not yet run

    # -- start ------------------------------------------------------------------

    def start(self, saved: Any) -> None:
        """Adopt the loaded checkpoint (or an empty one) and apply the input."""
        o = self.o
        base_cfg = o.checkpoint_config
        if saved is None:
            checkpoint, metadata, pending, parent_cfg, cfg = (
                empty_checkpoint(),
                {"step": -2},
                [],
                None,
                base_cfg,
            )
        else:
            checkpoint, metadata = saved.checkpoint, saved.metadata
            pending = [(str(t), c, v) for t, c, v in (saved.pending_writes or [])]
            parent_cfg = saved.parent_config
            cfg = {
                **base_cfg,
                "configurable": {**base_cfg["configurable"], **saved.config["configurable"]},
            }
            migrate_checkpoint(checkpoint)
        self.has_parent = saved is not None
        self.checkpoint_config = cfg
        self.prev_checkpoint_config = parent_cfg
        self.checkpoint_id_saved = checkpoint["id"]
        self.checkpoint = checkpoint
        self.checkpoint_metadata = metadata
        self.pending_writes = pending
        self.channels, self.end_channels, self.stored, self.untracked = run_channels(
            self.graph.channels, checkpoint
        )
        self.step = metadata["step"] + 1
        self.stop = self.step + o.run.recursion_limit + 1
        self.previous_versions = store_filled(saved, dict(checkpoint["channel_versions"]))
        updated = checkpoint.get("updated_channels")
        self.updated_channels = start_run(self, set(updated) if updated else None)

    # -- steps ------------------------------------------------------------------

    def _prepare_tasks(self) -> None:
        plan = self._plan
        if plan is None or plan.channels is not self.channels:  # made once per run
            o, graph = self.o, self.graph
            plan = self._plan = run_plan(
                graph.nodes,
                self.channels,
                self.ns,
                True,
                o.parent_scratchpad,
                graph.retry_policy,
                graph.cache_policy,
                o.run.checkpoint_map,
            )
        renew_plan(
            plan, self.checkpoint, self.pending_writes, self.step, self.stop, self.resume_map
        )
        self.tasks = plan_tasks(plan, self.graph.trigger_to_nodes, self.updated_channels)
        emit_checkpoint(self)

    def tick(self) -> bool:
        """Plan the next step; False when the run is over (done, out of steps, or
        its ``RunControl`` asked it to drain: status "draining").

        Raises:
            GraphInterrupt: ``interrupt_before`` matched a task of this step.
        """
        if self.step > self.stop:
            self.status = "out_of_steps"
            self._prepare_tasks()
            return False
        self._prepare_tasks()
        if not self.tasks:
            self.status = "done"
            return False
        if not self.is_replaying and self.pending_writes:
            wanted = [w for w in self.pending_writes if w[0] in self.tasks]
            for tid, status in read_task_statuses(wanted).items():
                self.tasks[tid].writes.extend(status.output)
            if any(w[1] == ERROR_SOURCE_NODE for w in wanted):
                from threadloom.pregel.error_handlers import resume_handlers

                resume_handlers(self, wanted)
        o = self.o
        if o.interrupt_before and should_interrupt(
            self.checkpoint, o.interrupt_before, self.tasks.values()
        ):
            self.status = "interrupt_before"
            raise GraphInterrupt()
        # a drain stops here, after the breakpoint check (as LangGraph: a resume
        # passes the next step's breakpoints, so draining first would skip one)
        # and before the step's tasks are announced or run
        if o.control.drain_requested:
            self.status = "draining"
            return False
        if o.emitter.tasks:
            o.emitter.emit("tasks", map_debug_tasks(self.tasks.values(), o.run.config), self.step)
        for task in self.tasks.values():
            if task.writes:
                emit_task_writes(self, task, task.writes, cached=True)
        return True

    def commit(self, task: Any, exc: BaseException | None) -> None:
        """Record a finished task's outcome as pending writes."""
        if exc is None:
            for c, _ in task.writes:
                if c not in CONTROL_WRITES:
                    break
            else:  # nothing but control writes (or none): record that it finished
                task.writes.append((NO_WRITES, None))
            self.put_writes(task.id, task.writes)
            if task.cache_key is not None and self.o.cache is not None:
                self.o.cache_writes.append(task)
        elif isinstance(exc, GraphInterrupt):
            if exc.args and exc.args[0]:
                writes = [(INTERRUPT, exc.args[0])]
                writes.extend(w for w in task.writes if w[0] == RESUME)
                self.put_writes(task.id, writes)
        elif isinstance(exc, GraphBubbleUp):
            pass
        else:
            task.writes.append((ERROR, exc))
            if task.proc.error_handler_node is None:
                self.put_writes(task.id, task.writes)
                return
            from threadloom.pregel.error_handlers import handler_task

            task.writes.append((ERROR_SOURCE_NODE, task.name))
            self.put_writes(task.id, task.writes)
            if (handler := handler_task(self, task, exc)) is not None:
                self.error_handlers.append(handler)

    def put_writes(
        self, task_id: str, writes: Sequence[tuple[str, Any]], *, cached: bool = False
    ) -> None:
        """Keep a task's writes for this step and hand them to the saver."""
        if not writes:
            return
        self.written_task_ids.add(task_id)
        for w in writes:
            if w[0] not in WRITES_IDX_MAP:
                break
        else:  # special channels only: the last write per channel wins
            writes = list({w[0]: w for w in writes}.values())
        if task_id == NULL_TASK_ID:
            self.pending_writes = [
                w for w in self.pending_writes if w[0] != task_id or w[1] not in WRITES_IDX_MAP
            ]
            writes = sorted(writes, key=lambda w: w[0] in WRITES_IDX_MAP)
            to_save = [w[1:] for w in self.pending_writes if w[0] == task_id] + list(writes)
        else:
            # a new list either way: scratchpads of this step hold the old one
            pending = self.pending_writes
            self.pending_writes = [w for w in pending if w[0] != task_id] if pending else []
            to_save = list(writes)
        if self.untracked:
            to_save = [
                (c, self._sanitize(v) if c == TASKS else v)
                for c, v in to_save
                if c not in self.untracked
            ]
        self.pending_writes += [(task_id, c, v) for c, v in writes]
        o = self.o
        task = self.tasks.get(task_id)
        if o.persister is not None and o.durability != "exit":
            o.persister.put_writes(
                self._writes_config(), to_save, task_id, task_path_str(task.path) if task else ""
            )
        if task is not None:
            emit_task_writes(self, task, writes, cached=cached)

    def _sanitize(self, value: Any) -> Any:
        if isinstance(value, Send) and isinstance(value.arg, dict):
            arg = {k: v for k, v in value.arg.items() if k not in self.untracked}
            return Send(value.node, arg, timeout=value.timeout)
        return value

    def emit_values(self, writes: Any) -> None:
        emit_values(self, writes)

    def after_tick(self) -> None:
        """Apply the step's writes, save the checkpoint.

        Raises:
            GraphInterrupt: ``interrupt_after`` matched a task of this step.
        """
        tasks = self.tasks.values()
        self.updated_channels = apply_writes(
            self.checkpoint,
            self.channels,
            tasks,
            self.next_version,
            self.graph.trigger_to_nodes,
            self.end_channels,
        )
        o = self.o
        keys = o.output_keys
        if o.emitter.values and not self.updated_channels.isdisjoint(
            (keys,) if isinstance(keys, str) else keys
        ):
            emit_step_values(self, tasks)
        self.pending_writes.clear()
        self.is_replaying = False
        self.put_checkpoint({"source": "loop"}, last=self._ends_here())
        if o.interrupt_after and should_interrupt(self.checkpoint, o.interrupt_after, tasks):
            self.status = "interrupt_after"
            self._prepare_tasks()
            raise GraphInterrupt()
        # the resume reaches only the tasks of a graph's first step: a stateful
        # (checkpointer=True) grandchild started by a later step of a nested
        # graph is a new call, not the paused one (it used to resume its old
        # finished run and hand back stale output)
        self.resuming_flag = None

    def exit(self, exc: BaseException | None) -> bool:
        """Final saves (durability "exit") and interrupt handling; True to swallow ``exc``."""
        o = self.o
        self.exit_saves(exc)
        if isinstance(exc, GraphInterrupt) and not self.is_nested:
            if self.pending_writes and any(t.writes for t in self.tasks.values()):
                updated = apply_writes(
                    self.checkpoint,
                    self.channels,
                    self.tasks.values(),
                    self.next_version,
                    self.graph.trigger_to_nodes,
                    self.end_channels,
                )
                keys = o.output_keys
                if not updated.isdisjoint((keys,) if isinstance(keys, str) else keys):
                    self.emit_values([w for t in self.tasks.values() for w in t.writes])
            if not exc.args or not exc.args[0]:
                o.emitter.emit("updates", [{INTERRUPT: exc.args[0] if exc.args else ()}], self.step)
            self.output = read_channels(self.channels, o.output_keys)
            return True
        if exc is None:
            self.output = read_channels(self.channels, o.output_keys)
        return False

    def drained(self) -> GraphDrained:
        """The error a drained run ends with (status "draining"), with its reason."""
        return GraphDrained(self.o.control.drain_reason or "shutdown")

    def input_task_id(self) -> str:
        """Id under which ``update_state(as_node="__input__")`` files its writes."""
        return str(uuid5(UUID(self.checkpoint["id"]), INPUT))

"""[1] How a run starts: resume where the thread stopped, or apply new input.

Decides (as LangGraph's ``PregelLoop._first``) whether this run resumes the
saved step (input ``None``, a ``Command``, or a nested graph told so by its
parent), whether it time-travels (an explicit ``checkpoint_id`` without a resume
answer: a ``fork`` checkpoint branches off), turns a ``Command`` into
``NULL_TASK_ID`` writes, and applies new input as the ``input`` checkpoint.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from threadloom.constants import END, INPUT, INTERRUPT, NULL_TASK_ID, RESUME, START
from threadloom.errors import (
    CheckpointerRequiredError,
    EmptyInputError,
    InvalidUpdateError,
    UnknownInterruptError,
)
from threadloom.pregel.io import map_command, map_input
from threadloom.pregel.replay import ReplayState
from threadloom.pregel.task import PregelTaskWrites
from threadloom.pregel.tasks import prepare_next_tasks
from threadloom.pregel.writes import apply_writes, read_task_statuses
from threadloom.types import Command

__all__ = ["StartMode", "start_mode", "start_run"]


class StartMode(NamedTuple):
    """How this run relates to the saved checkpoint."""

    resuming: bool
    time_travel: bool
    forks: bool
    flag: bool | None  # the parent's "resuming" flag for nested graphs (None: not told)


def _is_resume_map(resume: Any) -> bool:
    return isinstance(resume, dict) and all(
        isinstance(k, str) and len(k) == 32 and all(c in "0123456789abcdef" for c in k)
        for k in resume
    )


def start_mode(loop: Any) -> StartMode:
    """Resume, replay (time travel) or fresh input, from the input and the checkpoint."""
    inp = loop.input
    is_command = isinstance(inp, Command)
    same_run = not loop.is_nested and (loop.o.run.config.get("metadata") or {}).get(
        "run_id", 1
    ) == loop.checkpoint_metadata.get("run_id", 2)
    flag = loop.resuming_flag if loop.is_nested else None
    adopted = loop.replay.adopted.get(loop.ns) if loop.is_nested and loop.replay else None
    if adopted is not None and loop.checkpoint["channel_versions"]:
        # a child replayed from a checkpoint the user named (pregel/replay.py): its
        # pending tasks run again; a copied history is already the new branch
        source = loop.checkpoint_metadata.get("source")
        forks = adopted == "fork" and source not in ("update", "fork")
        return StartMode(True, True, forks, True)
    default = inp is None or is_command or same_run
    resuming = bool(loop.checkpoint["channel_versions"]) and bool(default if flag is None else flag)
    addressed = not loop.is_nested and bool(loop.o.run.checkpoint_id)
    resume_given = is_command and inp.resume is not None
    time_travel = addressed and not (resume_given or bool(flag))
    forks = (
        resuming
        and time_travel
        and (loop.checkpoint_metadata.get("source") not in ("update", "fork") or loop.superseded)
    )
    return StartMode(resuming, time_travel, forks, flag)


def pending_interrupts(pending_writes: list[Any]) -> set[str]:
    """Ids of interrupts still waiting for an answer."""
    return {
        i.id
        for status in read_task_statuses(pending_writes).values()
        for i in status.pending_interrupts
        if hasattr(i, "id")
    }


def _command_writes(loop: Any, cmd: Command, forks: bool) -> list[tuple[str, str, Any]]:
    """Save a Command's writes (or return them, to be carried into a fork).

    Raises:
        CheckpointerRequiredError: a resume without checkpointer.
        UnknownInterruptError: an unaddressed resume while several interrupts are
            pending, or a resume map naming ids that are not pending.
        EmptyInputError: the Command holds nothing.
    """
    resume_is_map = False
    if cmd.resume is not None:
        if loop.o.checkpointer is None:
            raise CheckpointerRequiredError(
                "Cannot use Command(resume=...) without checkpointer: compile the graph with "
                "checkpointer=... so the paused state can be stored and resumed"
            )
        resume_is_map = _is_resume_map(cmd.resume)
        pending = pending_interrupts(loop.pending_writes)
        if resume_is_map:
            if pending and (unknown := sorted(set(cmd.resume) - pending)):
                raise UnknownInterruptError(
                    f"Command(resume=...) names interrupt id(s) {unknown} that are not pending "
                    f"on thread {loop.o.run.thread_id!r}; pending: {sorted(pending)}"
                )
            loop.resume_map = cmd.resume
        elif len(pending) > 1:
            got = ""
            if isinstance(cmd.resume, dict):  # a map whose keys are no interrupt ids
                keys = sorted(map(repr, cmd.resume))[:5]
                got = f"; its dict keys {', '.join(keys)} are not interrupt ids (32 hex chars)"
            raise UnknownInterruptError(
                "When there are multiple pending interrupts, you must specify the "
                f"interrupt id when resuming: Command(resume={{id: value, ...}}) with ids "
                f"from {sorted(pending)} (thread {loop.o.run.thread_id!r}){got}"
            )
    grouped: dict[str, list[tuple[str, Any]]] = {}
    for tid, c, v in map_command(cmd):
        if not (c == RESUME and resume_is_map):
            grouped.setdefault(tid, []).append((c, v))
    if resume_is_map and _drop_stale_answer(loop):
        grouped.setdefault(NULL_TASK_ID, []).append((RESUME, None))
    if not grouped and not resume_is_map:
        raise EmptyInputError("Received empty Command input")
    carried: list[tuple[str, str, Any]] = []
    for tid, ws in grouped.items():
        if forks:
            carried.extend((tid, c, v) for c, v in ws)
        else:
            loop.put_writes(tid, ws)
    return carried


def _drop_stale_answer(loop: Any) -> bool:
    """An answer given without an interrupt id (``Command(resume=v)``) is stored
    once for the thread and taken by the first question the re-run node asks;
    it then also lives on in that task's own answers. A later resume by id map
    left it stored, so the node's next unanswered question took it again: q1
    answered plainly, q2 by id, and q3 silently got q1's answer (LangGraph does
    the same). It is dropped here and overwritten in storage by ``None``, which
    reads as no answer. True when there was one."""
    stale = [w for w in loop.pending_writes if w[0] == NULL_TASK_ID and w[1] == RESUME]
    if not any(w[2] is not None for w in stale):
        return False
    loop.pending_writes = [w for w in loop.pending_writes if w not in stale]
    return True


def _apply(loop: Any, tasks: list[Any]) -> set[str]:
    return apply_writes(
        loop.checkpoint, loop.channels, tasks, loop.next_version, loop.graph.trigger_to_nodes
    )


def _replay_point(loop: Any) -> str:
    """Subgraphs replay from before this checkpoint: the addressed one, or the parent of
    an update/fork checkpoint (which has no subgraph history of its own)."""
    prev = loop.prev_checkpoint_config
    if loop.checkpoint_metadata.get("source") in ("update", "fork") and prev:
        return prev["configurable"].get("checkpoint_id") or loop.checkpoint["id"]
    return loop.checkpoint["id"]


def _is_fresh_command(loop: Any, inp: Any, mode: StartMode) -> bool:
    """A ``Command`` without ``resume`` as the first input of a root run on a new thread."""
    return (
        isinstance(inp, Command)
        and inp.resume is None
        and not mode.resuming
        and not loop.is_nested
        and not loop.checkpoint["channel_versions"]
    )


def _start_fresh_command(loop: Any, cmd: Command) -> None:
    """A new thread started by a Command: its update is the input, its goto the next step.

    LangGraph hands such a Command to the START node as well, which applies the
    update a second time and also runs START's edges next to ``goto``. Here the
    update (already applied, as the ``input`` checkpoint's writes) counts once, then
    the run goes where ``goto`` says, or on from START when there is no goto (an
    empty input to the START node, so its edges and branches fire on the updated
    state). A raw Pregel graph needs no such kick: the update triggers its nodes.
    """
    gotos = cmd.goto if isinstance(cmd.goto, (list, tuple)) else [cmd.goto]
    unknown = [g for g in gotos if isinstance(g, str) and g != END and g not in loop.graph.nodes]
    if unknown:
        raise InvalidUpdateError(
            f"Command(goto={unknown[0]!r}) starts thread {loop.o.run.thread_id!r} at a node "
            f"that is not in the graph; nodes: {sorted(n for n in loop.graph.nodes if n != START)}"
        )
    if not cmd.goto and loop.graph.input_channels == START:
        _apply(loop, [PregelTaskWrites((), INPUT, [(START, {})], [])])
    loop.put_checkpoint({"source": "input"}, hold=True)
    # the state as of the input, as the START step's values event after a dict input:
    # the output of a run that goto=END or interrupt_before stops at once
    loop.emit_values(True)


def _no_input_message(loop: Any, inp: Any) -> str:
    """Why there is nothing to run, in the caller's terms: resuming a thread that
    has no checkpoint (a mistyped ``thread_id``, a deleted thread) is named as such."""
    message = f"Received no input for {loop.graph.input_channels}"
    if loop.has_parent or loop.is_nested or loop.o.checkpointer is None:
        return message
    thread = loop.o.run.thread_id
    what = "Command(resume=...)" if isinstance(inp, Command) else "invoke(None)"
    return (
        f"{message}: thread {thread!r} has no checkpoint, so {what} has nothing to "
        "resume (is the thread_id right? a new thread needs an input)"
    )


def start_run(loop: Any, updated_channels: set[str] | None) -> set[str] | None:
    """Apply the run's input to ``loop``; return the channels updated so far.

    Raises:
        EmptyInputError: no input and nothing to resume.
    """
    mode = start_mode(loop)
    copied = loop.is_nested and loop.replay and loop.replay.adopted.get(loop.ns) == "copy"
    if copied and not loop.checkpoint_config["configurable"].get("checkpoint_id"):
        loop.checkpoint_id_saved = None  # an unsaved copy (durability "exit"): save at exit
    # finished tasks re-run on time travel, or when resuming a checkpoint the thread
    # has moved past (their saved writes belong to the old branch)
    loop.is_replaying = mode.time_travel or loop.superseded
    if mode.time_travel:
        loop.pending_writes = [w for w in loop.pending_writes if w[1] != RESUME]
    inp = loop.input
    fresh = _is_fresh_command(loop, inp, mode)
    carried = _command_writes(loop, inp, mode.forks or fresh) if isinstance(inp, Command) else []
    null_writes = [w[1:] for w in (*loop.pending_writes, *carried) if w[0] == NULL_TASK_ID]
    if null_writes:
        more = _apply(loop, [PregelTaskWrites((), INPUT, null_writes, [])])
        if updated_channels is not None:
            updated_channels.update(more)
    if fresh:
        _start_fresh_command(loop, inp)
        updated_channels = None  # every node is checked for triggers
    elif mode.resuming:
        seen_all = loop.checkpoint["versions_seen"]  # per-node dicts are replaced (writes.py)
        versions = loop.checkpoint["channel_versions"]
        seen_all[INTERRUPT] = {
            **seen_all.get(INTERRUPT, {}),
            **{k: versions[k] for k in loop.channels if k in versions},
        }
        if mode.forks:
            loop.pending_writes = [w for w in loop.pending_writes if w[1] != INTERRUPT]
            loop.put_checkpoint({"source": "fork"})
        loop.emit_values(True)
    elif input_writes := list(
        map_input(loop.graph.input_channels, None if isinstance(inp, Command) else inp)
    ):
        # the unfinished tasks of the saved step are dropped: their triggers are consumed
        discard = prepare_next_tasks(
            loop.checkpoint,
            loop.pending_writes,
            loop.graph.nodes,
            loop.channels,
            step=loop.step,
            stop=loop.stop,
            checkpoint_ns=loop.ns,
            for_execution=True,
            updated_channels=updated_channels,
            trigger_to_nodes=loop.graph.trigger_to_nodes,
        )
        updated_channels = _apply(
            loop, [*discard.values(), PregelTaskWrites((), INPUT, input_writes, [])]
        )
        loop.updated_channels = updated_channels
        # a root run's input checkpoint may ride with the first step's save
        loop.put_checkpoint({"source": "input"}, hold=not loop.is_nested)
    elif mode.flag is None:
        raise EmptyInputError(_no_input_message(loop, inp))
    if not loop.is_nested:
        loop.resuming_flag = mode.resuming
        if mode.time_travel:
            loop.replay = ReplayState(
                _replay_point(loop), loop.o.run.replay_targets, loop.o.durability
            )
    loop.status = "pending"
    return updated_channels

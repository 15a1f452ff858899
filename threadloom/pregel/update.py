"""``update_state`` / ``bulk_update_state`` planned without I/O, then written in one go.

An update is a *superstep played by hand*: the chosen node's writers run on
the given values (so its edges fire, exactly as if the node had returned
them), the writes are applied to the channels and a new checkpoint
(``source="update"``) becomes the head of the thread. Updating an older
checkpoint makes the new one a sibling of that checkpoint's children: a fork.

Special ``as_node`` values: ``"__input__"`` (values are graph input,
``source="input"``), ``"__copy__"`` (a copy of the checkpoint next to it, same
parent, ``source="fork"``) and ``"__end__"`` with ``None`` (finish the step:
finished tasks' writes applied, the rest dropped).

:func:`plan_bulk` is a generator: it yields :class:`ReadTuple` requests (and
:class:`RunWriters`: the driver runs a node's writers, awaiting async routing
functions under ``aupdate_state``) and returns the list of saver operations. Nothing is written until every
superstep has been validated and planned, so a bad update in the last
superstep leaves the thread untouched (LangGraph writes superstep by superstep).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any
from uuid import UUID, uuid5

from threadloom.channels.delta_fill import filled_versions, store_filled
from threadloom.checkpoint.base import (
    CheckpointTuple,
    copy_checkpoint,
    create_checkpoint,
    empty_checkpoint,
)
from threadloom.constants import (
    CONFIG_KEY_CHECKPOINT_ID,
    CONFIG_KEY_CHECKPOINT_NS,
    COPY,
    END,
    INPUT,
    INTERRUPT,
    NULL_TASK_ID,
    PUSH,
)
from threadloom.errors import CheckpointNotFoundError, InvalidUpdateError
from threadloom.pregel.checkpoint import (
    channels_from_checkpoint,
    get_new_channel_versions,
    migrate_checkpoint,
)
from threadloom.pregel.ids import task_path_str
from threadloom.pregel.io import map_input
from threadloom.pregel.snapshot import CONF, ReadTuple, patch_checkpoint_map, trigger_to_nodes
from threadloom.pregel.task import PregelTaskWrites
from threadloom.pregel.tasks import prepare_next_tasks
from threadloom.pregel.update_writers import RunWriters
from threadloom.pregel.writes import apply_writes, read_task_statuses
from threadloom.types import StateUpdate

__all__ = ["Op", "infer_as_node", "plan_bulk", "validate_supersteps"]

Op = tuple[str, tuple[Any, ...]]
"""``("put", (config, checkpoint, metadata, new_versions))`` or
``("put_writes", (config, writes, task_id, task_path))``."""


def validate_supersteps(graph: Any, supersteps: Sequence[Sequence[Any]]) -> list[list[StateUpdate]]:
    """Shape checks that need no state: every superstep non-empty, names known.

    Raises:
        ValueError: no supersteps, or an empty one (as LangGraph).
        InvalidUpdateError: several updates in one superstep without ``as_node``,
            or an ``as_node`` that is neither a node nor a special name.
    """
    if len(supersteps) == 0:
        raise ValueError("bulk_update_state needs at least one superstep, got none")
    out: list[list[StateUpdate]] = []
    for i, updates in enumerate(supersteps):
        if len(updates) == 0:
            raise ValueError(f"superstep {i} of bulk_update_state has no updates")
        step = [StateUpdate(*u) if not isinstance(u, StateUpdate) else u for u in updates]
        for u in step:
            if len(step) > 1 and u.as_node is None:
                raise InvalidUpdateError(
                    f"superstep {i} applies {len(step)} updates: each needs as_node "
                    f"(one of {_valid(graph)})"
                )
            if u.as_node is not None and u.as_node not in (INPUT, COPY, END):
                _check_node(graph, u.as_node)
        out.append(step)
    return out


def _valid(graph: Any) -> str:
    return ", ".join(repr(n) for n in graph.nodes)


def _check_node(graph: Any, name: str) -> None:
    if name == END:
        raise InvalidUpdateError(
            "as_node='__end__' (END) takes values=None only: it finishes the current step "
            "without its pending tasks; to write values, name the node they come from "
            f"(one of {_valid(graph)})"
        )
    if name not in graph.nodes:
        raise InvalidUpdateError(
            f"cannot update state as node {name!r}: the graph has no such node "
            f"(valid: {_valid(graph)}, or '__input__', '__copy__', '__end__')"
        )


def infer_as_node(graph: Any, versions_seen: dict[str, dict[str, Any]]) -> str | None:
    """The node an update without ``as_node`` stands for: the one that ran last."""
    if len(graph.nodes) == 1:
        return next(iter(graph.nodes))
    seen = {k: v for k, v in versions_seen.items() if not k.startswith("__snapshot")}
    if not any(v for vv in seen.values() for v in vv.values()):
        inputs = graph.input_channels
        return inputs if isinstance(inputs, str) and inputs in graph.nodes else None
    last = sorted((v, n) for n, s in seen.items() if n in graph.nodes for v in s.values())
    if len(last) == 1 or (last and last[-1][0] != last[-2][0]):
        return last[-1][1]
    return None


def _ambiguous(graph: Any, versions_seen: dict[str, dict[str, Any]]) -> InvalidUpdateError:
    """Names the nodes that ran last together: those are the choices that make
    sense, not every node of the graph."""
    last = [(max(s.values()), n) for n, s in versions_seen.items() if n in graph.nodes and s]
    top = max((v for v, _ in last), default=None)
    tied = sorted({n for v, n in last if v == top}) if top is not None else []
    if len(tied) < 2:
        return InvalidUpdateError(f"Ambiguous update, specify as_node (one of {_valid(graph)})")
    return InvalidUpdateError(
        "Ambiguous update, specify as_node: "
        f"{', '.join(map(repr, tied))} ran last together (any of {_valid(graph)} is accepted)"
    )


class _Step:
    """One superstep's working state: the loaded tuple and the checkpoint being built."""

    def __init__(self, graph: Any, config: dict[str, Any], saved: CheckpointTuple | None) -> None:
        self.graph = graph
        self.config = config
        self.saved = saved
        if saved is not None:
            migrate_checkpoint(saved.checkpoint)
        self.checkpoint = copy_checkpoint(saved.checkpoint) if saved else empty_checkpoint()
        self.previous_versions = (
            store_filled(saved, dict(saved.checkpoint["channel_versions"])) if saved else {}
        )
        self.step = (saved.metadata or {}).get("step", -1) if saved else -1
        self.parents = (saved.metadata or {}).get("parents", {}) if saved else {}
        conf = dict(config[CONF])
        conf.setdefault(CONFIG_KEY_CHECKPOINT_NS, "")
        if saved:
            conf.update(saved.config[CONF])
        self.put_config = {**config, CONF: conf}
        self.channels = channels_from_checkpoint(graph.channels, self.checkpoint)
        self.triggers = trigger_to_nodes(graph)

    def next_tasks(self, checkpoint: Any = None, step_offset: int = 1) -> dict[str, Any]:
        saved = self.saved
        return prepare_next_tasks(
            checkpoint or self.checkpoint,
            list(saved.pending_writes or []) if saved else [],
            self.graph.nodes,
            self.channels,
            step=self.step + step_offset,
            stop=self.step + step_offset + 2,
            checkpoint_ns=self.put_config[CONF].get(CONFIG_KEY_CHECKPOINT_NS, ""),
            for_execution=True,
        )

    def apply(self, tasks: Any, saver: Any) -> set[str]:
        return apply_writes(
            self.checkpoint, self.channels, tasks, saver.get_next_version, self.triggers
        )

    def put(
        self, ops: list[Op], metadata: dict[str, Any], id_step: int, *, channels: bool = True
    ) -> tuple[dict[str, Any], CheckpointTuple]:
        """Stage the new checkpoint; return its config and the tuple later steps load."""
        new = create_checkpoint(self.checkpoint, self.channels if channels else None, id_step)
        versions = get_new_channel_versions(self.previous_versions, new["channel_versions"])
        return _stage_put(ops, self.put_config, new, metadata, versions, self.saved)


def _stage_put(
    ops: list[Op],
    config: dict[str, Any],
    checkpoint: Any,
    metadata: dict[str, Any],
    versions: dict[str, Any],
    saved: CheckpointTuple | None,
) -> tuple[dict[str, Any], CheckpointTuple]:
    ops.append(("put", (config, checkpoint, metadata, versions)))
    conf = config[CONF]
    new_config = {
        CONF: {
            "thread_id": conf["thread_id"],
            CONFIG_KEY_CHECKPOINT_NS: conf.get(CONFIG_KEY_CHECKPOINT_NS, ""),
            CONFIG_KEY_CHECKPOINT_ID: checkpoint["id"],
        }
    }
    parent = config if conf.get(CONFIG_KEY_CHECKPOINT_ID) else None
    staged = CheckpointTuple(new_config, checkpoint, metadata, parent, [])
    return patch_checkpoint_map(new_config, saved.metadata if saved else None), staged


def plan_bulk(
    graph: Any, saver: Any, config: dict[str, Any], supersteps: list[list[StateUpdate]]
) -> Generator[ReadTuple | RunWriters, Any, tuple[list[Op], dict[str, Any]]]:
    """Plan every superstep; return the saver operations and the final config."""
    ops: list[Op] = []
    staged: dict[str, CheckpointTuple] = {}
    current = config
    for i, updates in enumerate(supersteps):
        current = yield from _superstep(graph, saver, current, updates, i == 0, ops, staged)
    return ops, current


def _load(
    config: dict[str, Any], staged: dict[str, CheckpointTuple], specs: Any = None
) -> Generator[ReadTuple, Any, CheckpointTuple | None]:
    cid = config[CONF].get(CONFIG_KEY_CHECKPOINT_ID)
    if cid in staged:
        return staged[cid]
    saved = yield ReadTuple(config, specs)
    if saved is None and cid:
        conf = config[CONF]
        raise CheckpointNotFoundError(
            conf["thread_id"], cid, conf.get(CONFIG_KEY_CHECKPOINT_NS, "")
        )
    return saved


def _superstep(
    graph: Any,
    saver: Any,
    config: dict[str, Any],
    updates: list[StateUpdate],
    is_first: bool,
    ops: list[Op],
    staged: dict[str, CheckpointTuple],
) -> Generator[ReadTuple | RunWriters, Any, dict[str, Any]]:
    saved = yield from _load(config, staged, graph.channels)
    st = _Step(graph, config, saved)
    values, as_node = updates[0].values, updates[0].as_node
    if values is None and as_node == END:
        if len(updates) > 1:
            raise InvalidUpdateError("Cannot apply multiple updates when clearing state")
        new_config, tup = _finish_step(st, saver, ops)
    elif as_node == INPUT:
        if len(updates) > 1:
            raise InvalidUpdateError("Cannot apply multiple updates when updating as input")
        skip = yield from _superseded(saver, config, saved, is_first)
        new_config, tup = _as_input(st, saver, values, ops, skip)
    elif as_node == COPY:
        if len(updates) > 1:
            raise InvalidUpdateError("Cannot copy checkpoint with multiple updates")
        new_config, tup, follow = _copy(st, values, ops)
        if follow:
            staged[tup.checkpoint["id"]] = tup
            return (yield from _superstep(graph, saver, new_config, follow, False, ops, staged))
    else:
        skip = yield from _superseded(saver, config, saved, is_first)
        new_config, tup = yield from _as_nodes(st, saver, updates, ops, skip)
    staged[tup.checkpoint["id"]] = tup
    return new_config


def _superseded(
    saver: Any, config: dict[str, Any], saved: CheckpointTuple | None, is_first: bool
) -> Generator[ReadTuple, Any, bool]:
    """True when the addressed checkpoint is no longer the thread's head: its
    writes are then not stored on it (other children would see them)."""
    if saved is None or not is_first or not config[CONF].get(CONFIG_KEY_CHECKPOINT_ID):
        return False
    latest_conf = {k: v for k, v in config[CONF].items() if k != CONFIG_KEY_CHECKPOINT_ID}
    latest = yield ReadTuple({**config, CONF: latest_conf})
    return latest is not None and latest.checkpoint["id"] != saved.checkpoint["id"]


def _finish_step(st: _Step, saver: Any, ops: list[Op]) -> tuple[dict[str, Any], CheckpointTuple]:
    """as_node=END, values=None: apply finished tasks' writes, drop the rest of the step."""
    if st.saved is not None:
        tasks = st.next_tasks()
        pending = st.saved.pending_writes or []
        if null_writes := [(c, v) for t, c, v in pending if t == NULL_TASK_ID]:
            st.apply([PregelTaskWrites((), INPUT, null_writes, [])], saver)
        for tid, status in read_task_statuses(pending).items():
            if tid in tasks:
                tasks[tid].writes.extend(status.output)
        st.apply(tasks.values(), saver)
    meta = {"source": "update", "step": st.step + 1, "parents": st.parents}
    return st.put(ops, meta, st.step)


def _as_input(
    st: _Step, saver: Any, values: Any, ops: list[Op], skip_writes: bool
) -> tuple[dict[str, Any], CheckpointTuple]:
    writes = list(map_input(st.graph.input_channels, values))
    if not writes:
        raise InvalidUpdateError(f"Received no input writes for {st.graph.input_channels}")
    if st.saved is not None and not skip_writes:
        tid = str(uuid5(UUID(st.checkpoint["id"]), INPUT))
        ops.append(("put_writes", (st.put_config, writes, tid, "")))
    st.apply([PregelTaskWrites((), INPUT, writes, [])], saver)
    step = st.step + 1 if st.saved and (st.saved.metadata or {}).get("step") is not None else -1
    return st.put(ops, {"source": "input", "step": step, "parents": st.parents}, step)


def _copy(
    st: _Step, values: Any, ops: list[Op]
) -> tuple[dict[str, Any], CheckpointTuple, list[StateUpdate]]:
    """A sibling of the saved checkpoint (same parent, same values), then optional updates."""
    saved = st.saved
    if saved is None:
        raise InvalidUpdateError("Cannot copy a non-existent checkpoint")
    new = create_checkpoint(st.checkpoint, None, st.step)
    parent = saved.parent_config or {
        **saved.config,
        CONF: {k: v for k, v in saved.config[CONF].items() if k != CONFIG_KEY_CHECKPOINT_ID},
    }
    meta = {"source": "fork", "step": st.step + 1, "parents": st.parents}
    stored = filled_versions(saved, new["channel_versions"])  # rebuilt values: stored here
    new_config, tup = _stage_put(ops, parent, new, meta, stored, saved)
    follow: list[StateUpdate] = []
    if isinstance(values, list) and values:
        by_name: dict[str, list[str]] = {}
        for task in st.next_tasks(new, 2).values():
            by_name.setdefault(task.name, []).append(task.id)
        used: dict[str, int] = {}
        for item in values:
            if not isinstance(item, Sequence) or isinstance(item, str):
                raise InvalidUpdateError(f"Invalid update item: {item} when copying checkpoint")
            v, node = item[0], item[1]
            idx = used.get(node, 0)
            used[node] = idx + 1
            ids = by_name.get(node, [])
            follow.append(StateUpdate(v, node, ids[idx] if idx < len(ids) else None))
        grouped: dict[str, list[StateUpdate]] = {}
        for u in follow:
            grouped.setdefault(u.as_node, []).append(u)
        follow = [u for group in grouped.values() for u in group]
    return new_config, tup, follow


def _update_task_id(checkpoint_id: str, i: int) -> str:
    """Task id of the i-th update of a superstep with no planned task to reuse."""
    return str(uuid5(UUID(checkpoint_id), INTERRUPT if i == 0 else f"{INTERRUPT}:{i}"))


def _as_nodes(
    st: _Step, saver: Any, updates: list[StateUpdate], ops: list[Op], skip_writes: bool
) -> Generator[RunWriters, None, tuple[dict[str, Any], CheckpointTuple]]:
    """Run each update's node writers, store the writes, apply them, put the checkpoint."""
    graph = st.graph
    prepared: dict[str, list[str]] = {}
    if st.saved is not None:
        for t in st.next_tasks().values():
            prepared.setdefault(t.name, []).append(t.id)
    if len(updates) == 1 and updates[0].as_node is None:
        as_node = infer_as_node(graph, st.checkpoint["versions_seen"])
        if as_node is None:
            raise _ambiguous(graph, st.checkpoint["versions_seen"])
        updates = [updates[0]._replace(as_node=as_node)]
    run: list[tuple[str, PregelTaskWrites]] = []
    for i, (values, as_node, given_id) in enumerate(updates):
        _check_node(graph, as_node)
        queue = prepared.get(as_node) or []
        tid = given_id or (queue.pop(0) if queue else _update_task_id(st.checkpoint["id"], i))
        task = PregelTaskWrites((INTERRUPT, i), as_node, [], [INTERRUPT])
        yield RunWriters(graph, as_node, values, task, tid, st, saver)
        run.append((tid, task))
    if st.saved is not None and not skip_writes:
        for tid, task in run:
            if writes := [w for w in task.writes if w[0] != PUSH]:
                ops.append(("put_writes", (st.put_config, writes, tid, task_path_str(task.path))))
    st.apply([task for _, task in run], saver)
    meta = {"source": "update", "step": st.step + 1, "parents": st.parents}
    new_config, tup = st.put(ops, meta, st.step + 1)
    for tid, task in run:
        if push := [w for w in task.writes if w[0] == PUSH]:
            ops.append(("put_writes", (new_config, push, tid, "")))
            tup.pending_writes.extend((tid, c, v) for c, v in push)
    return new_config, tup

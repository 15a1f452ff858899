"""Running a node's writers for ``update_state`` outside of a run.

An update "as node X" must produce exactly the writes node X would have made
had it returned the values: plain channel writes, ``Command`` handling, and
conditional edges, which decide on the *fresh* state (the step's state with the
node's own writes applied). The runtime's ``_finish`` does that for a running
task; here it runs inside a minimal task scope whose ``read`` gives branches
that fresh state.

The planner does not run them itself: it yields a :class:`RunWriters` request
and the driver runs it, :func:`run_writers` under ``update_state`` and
:func:`arun_writers` under ``aupdate_state``, so an async routing function is
awaited on the caller's event loop (a cancel reaches it), as in a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from threadloom.constants import INTERRUPT, NS_END, NS_SEP
from threadloom.pregel.context import CURRENT, DEFAULT_RECURSION_LIMIT, RunContext
from threadloom.pregel.io import read_channels
from threadloom.pregel.task import PregelExecutableTask, PregelTaskWrites, Scratchpad
from threadloom.pregel.writes import apply_writes

__all__ = ["RunWriters", "arun_writers", "run_writers"]


class _UpdateScope:
    """Stands in for the runtime's TaskScope while an update's writers run."""

    def __init__(
        self, task: PregelExecutableTask, run: RunContext, saver: Any, st: Any, store: Any = None
    ) -> None:
        self.task = task
        self.run = run
        self.checkpointer = saver
        self.durability = "sync"
        self.resuming = False
        self.resume_map = None
        self.stream = None
        self.custom = None
        self.cache = None
        self.store = store  # routing functions may read runtime.store, as in a run
        self.replaying = False
        self._st = st
        # runtime.execution_info of the update's writers: the checkpoint updated
        self.checkpoint_id = st.checkpoint.get("id")
        self.attempt = 1
        self.first_attempt_time: float | None = None

    @property
    def scratchpad(self) -> Scratchpad:
        return self.task.scratchpad

    def send(self, writes: list[tuple[str, Any]]) -> None:
        self.task.writes.extend(writes)

    def config(self) -> dict[str, Any]:
        conf = dict(self.run.config.get("configurable") or {})
        conf.update({"checkpoint_ns": self.task.checkpoint_ns, "__pregel_task_id": self.task.id})
        return {
            **self.run.config,
            "configurable": conf,
            "metadata": {"langgraph_node": self.task.name, "langgraph_step": self.task.step},
        }

    def read(self, select: str | Sequence[str], fresh: bool = False) -> Any:
        """The state as of the update, plus (``fresh``) this update's own writes."""
        st = self._st
        channels = {k: c.copy() for k, c in st.channels.items()}
        if fresh and self.task.writes:
            checkpoint = {
                **st.checkpoint,
                "channel_versions": dict(st.checkpoint["channel_versions"]),
                "versions_seen": {k: dict(v) for k, v in st.checkpoint["versions_seen"].items()},
            }
            task = PregelTaskWrites(self.task.path, self.task.name, list(self.task.writes), [])
            apply_writes(checkpoint, channels, [task], None, st.triggers)
        return read_channels(channels, select)


class RunWriters(NamedTuple):
    """Ask the driver to fill ``task.writes`` from node ``as_node``'s writers."""

    graph: Any
    as_node: str
    values: Any
    task: PregelTaskWrites
    task_id: str
    st: Any
    saver: Any


def run_writers(request: RunWriters) -> None:
    """Fill ``request.task.writes`` with what node ``as_node``'s writers make of ``values``.

    Raises:
        InvalidUpdateError: the node has no writers, or the values do not fit them.
    """
    from threadloom.pregel.runner import _finish  # the runtime's output -> writes step

    scope = _scope(request)
    token = CURRENT.set(scope)  # type: ignore[arg-type]
    try:
        _finish(scope, request.values)  # type: ignore[arg-type]
    finally:
        CURRENT.reset(token)


async def arun_writers(request: RunWriters) -> None:
    """Async twin of :func:`run_writers`: async routing functions are awaited here."""
    from threadloom.pregel.runner import _afinish

    scope = _scope(request)
    token = CURRENT.set(scope)  # type: ignore[arg-type]
    try:
        await _afinish(scope, request.values)  # type: ignore[arg-type]
    finally:
        CURRENT.reset(token)


def _scope(request: RunWriters) -> _UpdateScope:
    from threadloom.errors import InvalidUpdateError

    graph, as_node, values, task, task_id, st, saver = request
    node = graph.nodes[as_node]
    if not node.writers and not node.handle_command:
        raise InvalidUpdateError(f"Node {as_node!r} has no writers: its state cannot be updated")
    ns = st.put_config["configurable"].get("checkpoint_ns", "")
    node_ns = f"{ns}{NS_SEP}{as_node}" if ns else as_node
    executable = PregelExecutableTask(
        name=as_node,
        input=values,
        proc=node,
        writes=task.writes,  # same list: what the writers record is the task's writes
        triggers=[INTERRUPT],
        retry_policy=(),
        cache_key=None,
        id=task_id,
        path=task.path,
        checkpoint_ns=f"{node_ns}{NS_END}{task_id}",
        scratchpad=Scratchpad(st.step, st.step + 2, [], None, [], None),
        step=st.step,
    )
    conf = st.config["configurable"]
    run = RunContext(
        config=st.config,
        thread_id=conf.get("thread_id"),
        checkpoint_ns=ns,
        checkpoint_id=None,
        checkpoint_map={},
        recursion_limit=DEFAULT_RECURSION_LIMIT,
    )
    return _UpdateScope(executable, run, saver, st, getattr(graph, "store", None))

"""[1] Setting up a run: config, namespace, checkpointer, sinks -> ``RunOptions`` + ``Loop``.

Shared by the sync and async drivers; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from threadloom.constants import NS_END, NS_SEP
from threadloom.errors import ConfigError
from threadloom.graph.runtime import RunControl
from threadloom.pregel.context import CURRENT, RunContext, TaskScope, parse_config
from threadloom.pregel.loop import Loop
from threadloom.pregel.messages import make_stream, with_stream
from threadloom.pregel.stream import Emitter, StreamSink, normalize_modes

__all__ = ["RunOptions", "make_scope", "parent_scope", "prepare"]


@dataclass(slots=True)
class RunOptions:
    """Per-run settings the loop reads (resolved once, before the first step)."""

    run: RunContext
    checkpointer: Any
    durability: str
    persister: Any
    emitter: Emitter
    output_keys: Any
    interrupt_before: Any
    interrupt_after: Any
    checkpoint_config: dict[str, Any]
    parent_scratchpad: Any
    parent_resuming: bool | None
    parent_resume_map: Any
    cache: Any
    custom: Any
    child_sink: StreamSink | None
    replay: Any = None
    store: Any = None  # compile(store=...): nodes read it as runtime.store / get_store()
    cache_writes: list[Any] = field(default_factory=list)
    control: Any = None  # RunControl: the loop stops before a step once it asks to drain


def parent_scope(config: Any) -> TaskScope | None:
    """The task a graph is being run from (its config's scope, or the task running
    in this context): None for a root run."""
    scope = ((config or {}).get("configurable") or {}).get("__pregel_scope")
    return scope if scope is not None else CURRENT.get()


def _nested_run(graph: Any, run: RunContext, parent: TaskScope) -> RunContext:
    """A subgraph's namespace: the task's, ``|n`` for a repeated call, recast if persistent."""
    ns = run.checkpoint_ns
    if cnt := parent.task.scratchpad.subgraph_counter():
        ns = f"{ns}{NS_SEP}{cnt}"
    if graph.checkpointer is True:
        ns = NS_SEP.join(part.split(NS_END)[0] for part in ns.split(NS_SEP))
    return RunContext(
        run.config, run.thread_id, ns, None, run.checkpoint_map, run.recursion_limit, parent
    )


def _checkpointer(graph: Any, parent: TaskScope | None) -> Any:
    """False: none; in a subgraph: the parent's; else the graph's own.

    Raises:
        RuntimeError: ``checkpointer=True`` on a root graph.
    """
    if graph.checkpointer is False:
        return None
    if parent is not None:
        return parent.checkpointer
    if graph.checkpointer is True:
        raise RuntimeError("checkpointer=True cannot be used for root graphs.")
    return graph.checkpointer


def _custom_writer(modes: set[str], put: Any, parent: TaskScope | None) -> Any:
    """Where ``get_stream_writer()`` sends: this run's sink, a streaming parent's, or nowhere."""
    if "custom" in modes:

        def custom(chunk: Any) -> None:
            scope = CURRENT.get()
            task_ns = scope.task.checkpoint_ns if scope is not None else ""
            put((tuple(task_ns.split(NS_SEP)[:-1]), "custom", chunk))

        return custom
    if parent is not None and parent.stream is not None:
        return parent.custom
    return None


def _checkpoint_config(run: RunContext, parent: TaskScope | None) -> dict[str, Any]:
    """The config saves are filed under (user keys kept: savers copy metadata from it)."""
    conf = {  # internal keys ("__pregel_*", "__threadloom_*") never reach savers or events
        k: v for k, v in (run.config.get("configurable") or {}).items() if not k.startswith("__")
    }
    conf["checkpoint_ns"] = run.checkpoint_ns
    if run.thread_id is not None:
        conf["thread_id"] = run.thread_id
    if run.checkpoint_id:
        conf["checkpoint_id"] = run.checkpoint_id
    elif parent is not None and run.checkpoint_ns in run.checkpoint_map:
        conf["checkpoint_id"] = run.checkpoint_map[run.checkpoint_ns]
    else:
        conf.pop("checkpoint_id", None)
    return {**{k: v for k, v in run.config.items() if k != "configurable"}, "configurable": conf}


def _control(kw: dict[str, Any], parent: TaskScope | None) -> RunControl:
    """The run's drain control, as LangGraph: the caller's, else the parent
    graph's (a subgraph drains with its parent), else a fresh one (nodes always
    find ``runtime.control``, so they can ask for a drain themselves)."""
    control = kw.get("control")
    if control is None and parent is not None:
        control = parent.control
    return control if control is not None else RunControl()


def prepare(
    graph: Any, input: Any, config: Any, put: Any, kw: dict[str, Any], persister_cls: Any
) -> tuple[Loop, RunOptions, Any]:
    """Resolve config, checkpointer, namespaces and sinks into a Loop (not started).

    Raises:
        ConfigError: a checkpointer but no ``thread_id``, or a bad ``recursion_limit``.
    """
    parent = parent_scope(config)
    run = parse_config(config, parent)
    if parent is not None:
        run = _nested_run(graph, run, parent)
    stream_mode = kw.get("stream_mode") or ("values" if parent is not None else graph.stream_mode)
    if kw.get("debug") or graph.debug:  # as LangGraph: debug prints updates and values
        kw["print_mode"] = ["updates", "values"]
    printed = normalize_modes(kw.get("print_mode") or [])
    modes = set(normalize_modes(stream_mode)) | set(printed)
    checkpointer = _checkpointer(graph, parent)
    if checkpointer is not None and run.thread_id is None:
        raise ConfigError(
            'Checkpointer requires config["configurable"]["thread_id"]; '
            'pass config={"configurable": {"thread_id": "..."}}'
        )
    durability = kw.get("durability") or (parent.durability if parent is not None else "async")
    own_sink = StreamSink(modes, put, not kw.get("_invoke") or "updates" in printed)
    parent_sink = parent.stream if parent is not None else None
    ns = run.checkpoint_ns
    output_keys = kw.get("output_keys")
    opts = RunOptions(
        run=run,
        checkpointer=checkpointer,
        durability=durability,
        persister=persister_cls(checkpointer, durability) if checkpointer is not None else None,
        emitter=Emitter(
            tuple(ns.split(NS_SEP)) if ns else (),
            [own_sink, parent_sink] if parent_sink else [own_sink],
        ),
        output_keys=output_keys if output_keys is not None else graph.stream_channels_asis,
        interrupt_before=kw.get("interrupt_before") or graph.interrupt_before_nodes,
        interrupt_after=kw.get("interrupt_after") or graph.interrupt_after_nodes,
        checkpoint_config=_checkpoint_config(run, parent),
        parent_scratchpad=parent.task.scratchpad if parent is not None else None,
        parent_resuming=parent.resuming if parent is not None else None,
        parent_resume_map=parent.resume_map if parent is not None else None,
        cache=parent.cache if parent is not None and parent.cache is not None else graph.cache,
        custom=_custom_writer(modes, put, parent),
        child_sink=own_sink if kw.get("subgraphs") else parent_sink,
        replay=parent.replay if parent is not None else None,
        # a subgraph uses its parent's store (as LangGraph), its own only when the parent has none
        store=parent.store
        if parent is not None and parent.store is not None
        else getattr(graph, "store", None),
        control=_control(kw, parent),
    )
    if "messages" in modes:  # nodes' configs carry the stream (pregel/messages.py)
        stream = make_stream(put, bool(kw.get("subgraphs")), tuple(ns.split(NS_SEP)) if ns else ())
        callbacks = with_stream(run.config.get("callbacks"), stream)
        opts.run = replace(run, config={**run.config, "callbacks": callbacks})
    if opts.replay is not None and not run.checkpoint_id:
        # loading from before the replay point: the child decides resume/new input itself
        opts.parent_resuming = None
    return Loop(graph, input, opts), opts, stream_mode


def make_scope(loop: Loop, task: Any) -> TaskScope:
    """What a running task sees (and lends to graphs it calls)."""
    o = loop.o
    run = o.run
    return TaskScope(  # positional (one per task): task ... replay, channels, checkpoint id
        task,
        run,
        # a graph without a saver (checkpointer=False) passes its parent's on
        o.checkpointer or (run.parent.checkpointer if run.parent else None),
        o.durability,
        loop.resuming_flag,
        loop.resume_map,
        o.child_sink,
        o.custom,
        o.cache,
        o.store,
        loop.replay,
        loop.channels,
        loop.checkpoint["id"],
        control=o.control,
    )

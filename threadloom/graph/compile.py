"""StateGraph -> Pregel: channels, nodes and writers in LangGraph's exact layout.

Layout (identical names, so checkpoints of the same graph compare 1:1):

- one channel per state key (``LastValue`` or ``BinaryOperatorAggregate``);
- ``__start__``: the input (``EphemeralValue``), read by a hidden START node that
  writes the input keys into state;
- ``branch:to:<node>``: a node's trigger; edges, branches and ``Command(goto=)``
  write ``None`` to it;
- ``join:<a>+<b>:<node>``: a ``NamedBarrierValue`` that fires once all starts ran;
- ``Send`` packets go to ``__pregel_tasks``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from typing import Any

from threadloom.constants import END, START, TAG_HIDDEN, TASKS
from threadloom.errors import InvalidUpdateError, ParentCommand
from threadloom.graph.allowlist import (
    apply_allowlist,
    apply_cache_allowlist,
    graph_types,
    trust_at_run,
)
from threadloom.graph.branch import (
    BranchWriter,
    check_destination,
    fresh_reader,
    injected_params,
    plain_name,
)
from threadloom.graph.draw import DrawableGraph, graph_of
from threadloom.graph.runtime import CONTEXT_KEY, coerce_context, with_runtime
from threadloom.graph.schema import (
    ROOT,
    channels_for,
    coerce_state,
    fields_of,
    needs_coercion,
)
from threadloom.graph.state import StateGraph, StateNodeSpec
from threadloom.pregel.main import Pregel
from threadloom.pregel.node import PregelNode, runs_inline
from threadloom.pregel.write import ChannelWrite, ChannelWriteEntry, ChannelWriteTupleEntry
from threadloom.types import Command, Overwrite, Send, ensure_valid_checkpointer

__all__ = ["CompiledStateGraph", "compile_state_graph"]

BRANCH_TO = "branch:to:{}"


class CompiledStateGraph(Pregel):
    """A runnable StateGraph: a :class:`Pregel` that remembers its builder."""

    def __init__(self, *, builder: StateGraph, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.builder = builder
        # the classes of its schemas and its subgraphs' (see graph/allowlist.py)
        self.trusted_types: tuple[type, ...] = ()
        self.trusted_serde: Any = None  # the parent saver's serializer last widened
        self.trusted_cache_serde: Any = None  # the parent node cache's, likewise

    def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """As :meth:`Pregel.stream`; ``context=`` is handed to nodes as ``runtime.context``.

        Run as a subgraph, it first trusts its own classes in the parent's saver.
        """
        trust_at_run(self, config)
        return super().stream(input, self._with_context(config, kwargs), **kwargs)

    def astream(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`stream`."""
        trust_at_run(self, config)
        return super().astream(input, self._with_context(config, kwargs), **kwargs)

    def _with_context(self, config: Any, kwargs: dict[str, Any]) -> Any:
        """Carry ``context=`` in the config, as an instance of ``context_schema``."""
        context = coerce_context(self.builder.context_schema, kwargs.pop("context", None))
        if context is None:
            return config
        config = dict(config or {})
        config["configurable"] = {**(config.get("configurable") or {}), CONTEXT_KEY: context}
        return config

    def get_graph(self, config: Any = None, *, xray: bool | int = False) -> DrawableGraph:
        """Nodes and edges as declared (``.draw_mermaid()`` renders them).

        ``xray=True`` (or a depth) draws subgraphs inline.
        """
        return graph_of(self.builder, xray)

    async def aget_graph(self, config: Any = None, *, xray: bool | int = False) -> DrawableGraph:
        """Async twin of :meth:`get_graph`."""
        return self.get_graph(config, xray=xray)

    # -- wiring -------------------------------------------------------------------

    def attach_node(self, key: str, spec: StateNodeSpec | None) -> None:
        """Add the Pregel node for ``key`` (``START`` is the hidden input node)."""
        fields = self.builder.fields
        if key == START:
            input_keys = [k for k in self.builder.schemas[self.builder.input_schema] if k in fields]
            updater = _update_mapper(START, input_keys, strict=False)
            # Reads the state too (LangGraph reads only __start__): a branch on START
            # then routes on the state plus the input, as LangGraph's fresh read does.
            state_keys = [k for k in fields if k != ROOT]
            self.nodes[START] = PregelNode(
                tags=[TAG_HIDDEN],
                triggers=[START],
                channels=[START, *state_keys] if state_keys else START,
                bound=_start_input if state_keys else None,
                writers=[
                    ChannelWrite(
                        [
                            ChannelWriteTupleEntry(updater),
                            ChannelWriteTupleEntry(_control_writer(START, self.nodes)),
                        ]
                    )
                ],
                handle_command=False,
            )
            return
        assert spec is not None
        managed = self.builder.managed
        schema_keys = list(self.builder.schemas[spec.input_schema])
        single = schema_keys == [ROOT]
        channel = BRANCH_TO.format(key)
        self.channels[channel] = _trigger_channel(spec.defer)
        self.nodes[key] = node = PregelNode(
            triggers=[channel],
            channels=ROOT if single else [k for k in schema_keys if k not in managed],
            mapper=_mapper_for(spec.input_schema, single),
            writers=[
                ChannelWrite(
                    [
                        ChannelWriteTupleEntry(
                            _update_mapper(
                                key,
                                list(fields),
                                strict=not _is_graph(spec.runnable),
                                dropped=frozenset(managed),
                            )
                        ),
                        ChannelWriteTupleEntry(
                            _control_writer(key, self.nodes),
                            static=_static_ends(spec.ends),
                        ),
                    ]
                )
            ],
            metadata=spec.metadata,
            retry_policy=spec.retry_policy,
            cache_policy=spec.cache_policy,
            bound=_bound(spec.runnable),
            handle_command=False,
        )
        # managed keys (RemainingSteps...) are computed from the task's step when it is planned
        node.managed = {k: managed[k] for k in schema_keys if k in managed} or None

    def attach_edge(self, starts: str | Sequence[str], end: str) -> None:
        """A plain edge writes ``branch:to:<end>``; a join fills ``join:<a>+<b>:<end>``."""
        if end == END:
            return
        if isinstance(starts, str):
            _add_write(self.nodes[starts], ChannelWriteEntry(BRANCH_TO.format(end), None))
            return
        from threadloom.channels import NamedBarrierValue, NamedBarrierValueAfterFinish

        name = f"join:{'+'.join(starts)}:{end}"
        barrier = (
            NamedBarrierValueAfterFinish if self.builder.nodes[end].defer else NamedBarrierValue
        )
        self.channels[name] = barrier(str, set(starts))
        self.nodes[end].triggers.append(name)
        for start in starts:
            _add_write(self.nodes[start], ChannelWriteEntry(name, start))

    def attach_branch(self, start: str, name: str, branch: Any) -> None:
        """A branch runs after ``start``'s own writers, on the state they produced."""
        builder = self.builder
        schema = branch.input_schema or (
            builder.nodes[start].input_schema if start in builder.nodes else builder.state_schema
        )
        keys = [k for k in builder.schemas[schema] if k not in builder.managed]
        reader = fresh_reader(
            builder.fields,
            keys,
            {k: builder.managed[k] for k in builder.schemas[schema] if k in builder.managed},
            _mapper_for(schema, keys == [ROOT]),
            merge_output=branch.input_schema is None,
        )
        self.nodes[start].writers.append(BranchWriter(branch, start, reader, BRANCH_TO, self.nodes))


def _add_write(node: PregelNode, entry: ChannelWriteEntry) -> None:
    """Add an edge's write to ``node``: into its last writer when that is a plain
    ``ChannelWrite`` (the same writes in the same order, one writer call per task
    instead of one per edge), else as a writer of its own (after a branch)."""
    last = node.writers[-1] if node.writers else None
    if type(last) is ChannelWrite:
        last.writes.append(entry)
    else:
        node.writers.append(ChannelWrite([entry]))


@runs_inline  # a dict read: async runs call it without a thread hop
def _start_input(values: dict[str, Any]) -> Any:
    """The START node's output: the graph input (the state it also read is for branches)."""
    return values.get(START)


def _bound(action: Any) -> Any:
    """The node's callable; functions asking for ``runtime``/``store`` get a wrapper."""
    if hasattr(action, "invoke") and not inspect.isroutine(action):
        return action  # a compiled graph or runnable
    wanted = injected_params(action)
    plain = inspect.isfunction(action) or inspect.ismethod(action)
    if wanted & {"runtime", "store"} or (wanted and not plain):
        return with_runtime(action, wanted)  # partials/callable objects: say what they take
    return action


def _is_graph(action: Any) -> bool:
    """A compiled graph used as a node: it returns its whole state, private keys included.

    Its output is filtered to the parent's keys (as LangGraph does for every node);
    function nodes keep the strict unknown-key check, where a stray key is a typo.
    """
    return hasattr(action, "invoke") and hasattr(action, "get_state")


def _trigger_channel(defer: bool) -> Any:
    from threadloom.channels import EphemeralValue, LastValueAfterFinish

    return LastValueAfterFinish(Any) if defer else EphemeralValue(Any, guard=False)


def _mapper_for(schema: Any, single: bool) -> Any:
    if single or not needs_coercion(schema):
        return None
    return lambda values: coerce_state(schema, values)


def _static_ends(ends: Any) -> list[tuple[str, Any, str | None]] | None:
    if not ends:
        return None
    if isinstance(ends, dict):
        return [(k if k == END else BRANCH_TO.format(k), None, label) for k, label in ends.items()]
    return [(e if e == END else BRANCH_TO.format(e), None, None) for e in ends]


def _control_writer(source: str, nodes: Collection[str]) -> Callable[[Any], list[tuple[str, Any]]]:
    """``source``'s :func:`_control_writes`, refusing targets not in ``nodes``."""

    def control_writes(value: Any) -> list[tuple[str, Any]]:
        if type(value) is dict:  # the usual state update: nothing to route
            return []
        writes = _control_writes(value)
        for chan, target in writes:
            check_destination(source, target if chan == TASKS else chan[_TO:], nodes)
        return writes

    return control_writes


_TO = len(BRANCH_TO.format(""))


def _control_writes(value: Any) -> list[tuple[str, Any]]:
    """``Send`` and ``Command(goto=...)`` returned by a node -> trigger writes."""
    if type(value) is dict:  # the usual state update: nothing to route
        return []
    if isinstance(value, Send):
        return [(TASKS, value)]
    commands = [value] if isinstance(value, Command) else []
    if isinstance(value, (list, tuple)):
        commands = [c for c in value if isinstance(c, Command)]
    writes: list[tuple[str, Any]] = []
    for cmd in commands:
        if cmd.graph == Command.PARENT:
            raise ParentCommand(cmd)
        gotos = [cmd.goto] if isinstance(cmd.goto, (Send, str)) else list(cmd.goto or ())
        for go in gotos:
            if isinstance(go, Send):
                writes.append((TASKS, go))
            elif isinstance(go, str) and go != END:
                writes.append((BRANCH_TO.format(plain_name(go)), None))
    return writes


def _object_updates(value: Any, keys: Sequence[str]) -> list[tuple[str, Any]]:
    """A dataclass/pydantic instance returned as an update: its set, non-None fields."""
    keep = getattr(value, "model_fields_set", None)
    defaults = {k: f.default for k, f in getattr(type(value), "model_fields", {}).items()}
    out = []
    for k in keys:
        if not hasattr(value, k):
            continue
        v = getattr(value, k)
        if v is not None or defaults.get(k, 0) is not None or (keep is not None and k in keep):
            out.append((k, v))
    return out


def _update_mapper(
    node: str, keys: list[str], *, strict: bool, dropped: frozenset[str] = frozenset()
) -> Any:
    """The writer that turns what ``node`` returned into state-key writes.

    ``strict`` (function nodes): a key the state does not declare raises
    :class:`InvalidUpdateError` naming the node and the key. The START node and
    subgraph nodes filter to the known keys instead, as LangGraph does.
    ``dropped`` keys (managed values, read-only) are declared but never written.
    """
    allowed = frozenset(keys)
    root = keys == [ROOT]

    def check(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        unknown = [k for k, _ in pairs if k not in allowed and k not in dropped]
        if unknown and strict and not root:
            raise InvalidUpdateError(
                f"node {node!r} returned unknown state key(s) {sorted(set(unknown))}; "
                f"the state declares {sorted(allowed)} (update_state(..., as_node={node!r}) "
                "is checked as that node's return value)"
            )
        return [(k, v) for k, v in pairs if k in allowed]

    def mapper(value: Any) -> list[tuple[str, Any]] | None:
        if type(value) is dict and not root:  # the usual update: no Command to look for
            pairs = list(value.items())
            for k in value:
                if k not in allowed:
                    return check(pairs)
            return pairs
        if value is None:
            return None
        if isinstance(value, Command):
            return [] if value.graph == Command.PARENT else check(list(value._update_as_tuples()))
        if (
            isinstance(value, (list, tuple))
            and value
            and any(isinstance(v, Command) for v in value)
        ):
            pairs: list[tuple[str, Any]] = []
            for item in value:
                pairs.extend(mapper(item) or ())
            return pairs
        if root:
            return [(ROOT, value)]
        if isinstance(value, dict):
            return check(list(value.items()))
        if isinstance(value, (Send, Overwrite)) or (
            isinstance(value, (list, tuple)) and value and all(isinstance(v, Send) for v in value)
        ):
            return None
        if fields_of(type(value)):
            return check(_object_updates(value, list(fields_of(type(value)))))
        if node == START:
            raise InvalidUpdateError(f"graph input must be a dict of state keys, got {value!r}")
        raise InvalidUpdateError(
            f"node {node!r} must return a dict, a Command or None, got {value!r}"
        )

    return mapper


def compile_state_graph(
    builder: StateGraph,
    *,
    checkpointer: Any = None,
    cache: Any = None,
    store: Any = None,
    interrupt_before: Any = None,
    interrupt_after: Any = None,
    debug: bool = False,
    name: str | None = None,
) -> CompiledStateGraph:
    """Validate ``builder`` and wire it into a :class:`CompiledStateGraph`."""
    interrupt_before = interrupt_before or []
    interrupt_after = interrupt_after or []
    named = [n for n in (*_as_list(interrupt_before), *_as_list(interrupt_after)) if n != "*"]
    builder.validate(interrupt=named)
    trusted = graph_types(builder)
    checkpointer = apply_allowlist(ensure_valid_checkpointer(checkpointer), trusted)
    cache = apply_cache_allowlist(cache, trusted)  # cached writes hold the same classes
    channels = channels_for(builder.fields)
    from threadloom.channels import EphemeralValue

    output_keys = [k for k in builder.schemas[builder.output_schema] if k not in builder.managed]
    compiled = CompiledStateGraph(
        builder=builder,
        nodes={},
        channels={**channels, START: EphemeralValue(builder.input_schema)},
        input_channels=START,
        stream_mode="updates",
        output_channels=ROOT if output_keys == [ROOT] else output_keys,
        stream_channels=ROOT if list(channels) == [ROOT] else list(channels),
        checkpointer=checkpointer,
        interrupt_before_nodes=interrupt_before,
        interrupt_after_nodes=interrupt_after,
        debug=debug,
        store=store,
        cache=cache,
        name=name or "LangGraph",
        auto_validate=False,
    )
    compiled.trusted_types = trusted
    compiled.attach_node(START, None)
    for key, spec in builder.nodes.items():
        compiled.attach_node(key, spec)
    for start, end in sorted(builder.edges):
        compiled.attach_edge(start, end)
    for starts, end in sorted(builder.waiting_edges):
        compiled.attach_edge(starts, end)
    for start, branches in builder.branches.items():
        for branch_name, branch in branches.items():
            compiled.attach_branch(start, branch_name, branch)
    compiled.trigger_to_nodes = compiled._index_triggers()  # nodes were attached after __init__
    return compiled.validate()


def _as_list(value: Any) -> list[str]:
    if not value:
        return []
    return [value] if isinstance(value, str) else list(value)

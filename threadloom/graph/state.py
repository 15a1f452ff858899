"""``StateGraph``: declare nodes that read and update a shared state, and edges.

The builder only records what was declared and checks it eagerly (unknown
nodes, duplicates, reserved names); :meth:`StateGraph.compile` turns it into a
runnable :class:`~threadloom.graph.compile.CompiledStateGraph`.

Example::

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_edge(START, "plan")
    graph = builder.compile(checkpointer=saver)
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_type_hints

from threadloom.constants import END, NS_END, NS_SEP, RESERVED, START
from threadloom.errors import InvalidGraphError
from threadloom.graph.branch import BranchSpec, ends_from_literal
from threadloom.graph.node_policies import (
    NodeDefaults,
    TimeoutLike,
    add_error_handler,
    with_node_error,
)
from threadloom.graph.schema import FieldSpec, channels_agree, fields_of, parse_schema
from threadloom.types import CachePolicy, RetryPolicy, TimeoutPolicy

if TYPE_CHECKING:
    from threadloom.graph.compile import CompiledStateGraph

__all__ = ["InvalidGraphError", "StateGraph", "StateNodeSpec"]


@dataclass
class StateNodeSpec:
    """A node as declared: what it runs and how."""

    runnable: Any
    metadata: dict[str, Any] | None
    input_schema: Any
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None
    cache_policy: CachePolicy | None
    ends: tuple[str, ...] | dict[str, str] | None = None
    defer: bool = False
    timeout: TimeoutPolicy | None = None
    trace_policy: Any = None
    """Kept for LangGraph code that reads it; threadloom does no tracing."""
    error_handler_node: str | None = None
    """The node that runs when this one fails (``add_node(..., error_handler=)``)."""
    is_error_handler: bool = False


def _node_name(action: Any) -> str:
    name = getattr(action, "name", None)
    if isinstance(name, str) and name:
        return name
    name = getattr(action, "__name__", None)
    if not name:
        name = type(action).__name__
    return name


def _infer_input_schema(action: Any) -> Any | None:
    """The class annotating a node function's first parameter, if it declares fields."""
    if inspect.isroutine(action):
        fn = action
    elif callable(action) and not hasattr(action, "invoke"):
        fn = type(action).__call__  # a callable object: look at its __call__
    else:
        return None  # a compiled graph or runnable reads the parent's state
    try:
        params = list(inspect.signature(fn).parameters)
        hints = get_type_hints(fn)
    except Exception:  # unresolvable annotations: use the graph's state schema
        return None
    if not params or params[0] not in hints:
        return None
    hint = hints[params[0]]
    return hint if inspect.isclass(hint) and fields_of(hint) else None


class StateGraph:
    """A graph whose nodes communicate by reading and updating one shared state.

    Args:
        state_schema: TypedDict, dataclass or pydantic model; each field is a
            channel, ``Annotated[T, reducer]`` fields merge updates with ``reducer``.
        context_schema: type of the run-scoped ``context`` nodes get via ``runtime``.
        input_schema: keys accepted as graph input (default: ``state_schema``).
        output_schema: keys returned by ``invoke`` (default: ``state_schema``).
    """

    def __init__(
        self,
        state_schema: Any = None,
        context_schema: Any = None,
        *,
        input_schema: Any = None,
        output_schema: Any = None,
        **deprecated: Any,
    ) -> None:
        context_schema, input_schema, output_schema = _old_names(
            deprecated, context_schema, input_schema, output_schema
        )
        if state_schema is None:
            if input_schema is None or output_schema is None:
                raise InvalidGraphError("StateGraph needs a state_schema")
            state_schema = input_schema
        self.nodes: dict[str, StateNodeSpec] = {}
        self.edges: set[tuple[str, str]] = set()
        self.waiting_edges: set[tuple[tuple[str, ...], str]] = set()
        self.branches: defaultdict[str, dict[str, BranchSpec]] = defaultdict(dict)
        self.schemas: dict[Any, dict[str, FieldSpec]] = {}
        self.fields: dict[str, FieldSpec] = {}
        self.managed: dict[str, Any] = {}
        """Managed keys (``RemainingSteps``...) -> their manager; they have no channel."""
        self.compiled = False
        self._node_defaults = NodeDefaults()
        self.state_schema = state_schema
        self.context_schema = context_schema
        self.input_schema = input_schema or state_schema
        self.output_schema = output_schema or state_schema
        self._add_schema(self.state_schema)
        self._add_schema(self.input_schema, allow_managed=False)
        self._add_schema(self.output_schema, allow_managed=False)

    @property
    def _all_edges(self) -> set[tuple[str, str]]:
        return self.edges | {(s, end) for starts, end in self.waiting_edges for s in starts}

    def _add_schema(self, schema: Any, *, allow_managed: bool = True) -> None:
        """Register a schema's keys; a key declared twice must merge the same way.

        A distinct input/output schema may not declare managed keys: a caller
        cannot set them and a result never holds them (LangGraph refuses too).
        """
        if schema in self.schemas:
            return
        try:
            specs = parse_schema(schema)
        except InvalidGraphError:
            raise
        except ValueError as exc:  # bad reducer, unresolvable annotation
            raise InvalidGraphError(str(exc)) from exc
        managed = {k: s.managed for k, s in specs.items() if s.managed is not None}
        if managed and not allow_managed:
            raise InvalidGraphError(
                f"managed state keys {sorted(managed)} in {getattr(schema, '__name__', schema)!s}: "
                "an input or output schema may not declare them (only the state schema or a "
                "node's input_schema)"
            )
        self.schemas[schema] = specs
        self.managed.update(managed)
        for key, spec in specs.items():
            if spec.managed is not None:
                continue
            known = self.fields.get(key)
            if known is None or (known.reducer is None and known.channel is None):
                self.fields[key] = spec
            elif (spec.reducer is not None or spec.channel is not None) and (
                spec.reducer is not known.reducer or not channels_agree(spec.channel, known.channel)
            ):
                raise InvalidGraphError(
                    f"state key {key!r} is declared twice with different reducers "
                    f"({getattr(schema, '__name__', schema)!s} disagrees with an earlier schema)"
                )

    def add_node(
        self,
        node: str | Callable[..., Any] | Any,
        action: Callable[..., Any] | Any | None = None,
        *,
        defer: bool = False,
        metadata: dict[str, Any] | None = None,
        input_schema: Any = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy | None = None,
        destinations: dict[str, str] | tuple[str, ...] | None = None,
        error_handler: Any = None,
        timeout: TimeoutLike = None,
        trace_policy: Any = None,
        **kwargs: Any,
    ) -> StateGraph:
        """Add a node: a function of the state (sync or async) or a compiled graph.

        The function may also take ``config`` and/or ``runtime`` by name. It returns
        a partial state update (dict), a ``Command``, or ``None``. ``timeout``
        (seconds, a timedelta or a :class:`~threadloom.types.TimeoutPolicy`) limits
        each attempt of an async node (docs/graph.md, "Node timeouts").

        ``error_handler`` runs instead of failing the run when the node raises.

        Raises:
            InvalidGraphError: duplicate or reserved name, or a name with ``:``/``|``.
            ValueError: a timeout <= 0.
        """
        if kwargs.get("retry") is not None:  # LangGraph's deprecated spelling
            retry_policy = kwargs.pop("retry")
        if kwargs:
            raise TypeError(f"add_node() got unexpected keyword arguments {sorted(kwargs)}")
        timeout = TimeoutPolicy.coerce(timeout)
        if isinstance(node, str):
            name = node
            if action is None:
                raise InvalidGraphError(f"node {name!r} needs an action: add_node(name, fn)")
        else:
            action, name = node, _node_name(node)
        self._check_new_node(name)
        if input_schema is None:
            input_schema = _infer_input_schema(action) or self.state_schema
        self._add_schema(input_schema)
        ends: tuple[str, ...] | dict[str, str] | None = destinations
        if ends is None:
            ends = ends_from_literal(action) if inspect.isroutine(action) else None
        handler = None
        if error_handler is not None:  # registered first, as LangGraph orders them
            handler = add_error_handler(self, name, error_handler, input_schema)
        self.nodes[name] = StateNodeSpec(
            runnable=with_node_error(action),  # `error: NodeError` -> None, as LangGraph
            metadata=metadata,
            input_schema=input_schema,
            retry_policy=retry_policy,
            cache_policy=cache_policy,
            ends=ends,
            defer=defer,
            timeout=timeout,
            trace_policy=trace_policy,
            error_handler_node=handler,
        )
        return self

    def set_node_defaults(
        self,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy | None = None,
        error_handler: Any = None,
        timeout: TimeoutLike = None,
    ) -> StateGraph:
        """Policies for every node of this graph that sets none itself (applied at
        compile; ``add_node``'s values win; subgraphs keep their own).

        Raises:
            ValueError: a timeout <= 0.
        """
        self._node_defaults.update(retry_policy, cache_policy, error_handler, timeout)
        return self

    def _check_new_node(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidGraphError(f"node names must be non-empty strings, got {name!r}")
        if name in self.nodes:
            raise InvalidGraphError(f"node {name!r} already present")
        if name in (START, END) or name in RESERVED:
            raise InvalidGraphError(f"node name {name!r} is reserved")
        for ch in (NS_SEP, NS_END):
            if ch in name:
                raise InvalidGraphError(f"node name {name!r} must not contain {ch!r}")

    def _check_known(self, name: str, role: str) -> None:
        if name not in self.nodes:
            raise InvalidGraphError(
                f"edge {role} unknown node {name!r}: add_node({name!r}, ...) first "
                f"(known nodes: {sorted(self.nodes)})"
            )

    def add_edge(self, start_key: str | Sequence[str], end_key: str) -> StateGraph:
        """Run ``end_key`` after ``start_key``; with a list, after *all* of them (a join).

        Raises:
            InvalidGraphError: END as start, START as end, or a join over unknown nodes.
        """
        if isinstance(start_key, str):
            if start_key == END:
                raise InvalidGraphError("END cannot be the start of an edge")
            if end_key == START:
                raise InvalidGraphError("START cannot be the end of an edge")
            self.edges.add((start_key, end_key))
            return self
        starts = tuple(start_key)
        if not starts:
            raise InvalidGraphError("add_edge() needs at least one start node")
        for start in starts:
            if start == END:
                raise InvalidGraphError("END cannot be the start of an edge")
            if start != START:
                self._check_known(start, "starts at")
        if end_key == START:
            raise InvalidGraphError("START cannot be the end of an edge")
        if end_key != END:
            self._check_known(end_key, "ends at")
        self.waiting_edges.add((starts, end_key))
        return self

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[..., Any],
        path_map: dict[Hashable, str] | list[str] | None = None,
    ) -> StateGraph:
        """After ``source``, call ``path(state)`` to choose the next node(s).

        ``path`` returns a node name, a list of names, a ``Send``, a list of
        ``Send`` or ``END``; with ``path_map`` its return values are keys of it.

        Raises:
            InvalidGraphError: a second branch with the same function name on ``source``.
        """
        name = getattr(path, "__name__", None) or "condition"
        if name == "<lambda>":
            name = "condition"
        if name in self.branches[source]:
            raise InvalidGraphError(f"branch {name!r} already exists for node {source!r}")
        self.branches[source][name] = BranchSpec.from_path(path, path_map)
        return self

    def add_sequence(
        self, nodes: Sequence[Callable[..., Any] | tuple[str, Callable[..., Any]]]
    ) -> StateGraph:
        """Add nodes that run one after another, each fed by the previous one."""
        if not nodes:
            raise InvalidGraphError("add_sequence() needs at least one node")
        previous: str | None = None
        for item in nodes:
            if isinstance(item, tuple):
                name, action = item
            else:
                action = item
                name = _node_name(item)
            self.add_node(name, action)
            if previous is not None:
                self.add_edge(previous, name)
            previous = name
        return self

    def set_entry_point(self, key: str) -> StateGraph:
        """Same as ``add_edge(START, key)``."""
        return self.add_edge(START, key)

    def set_conditional_entry_point(
        self, path: Callable[..., Any], path_map: dict[Hashable, str] | list[str] | None = None
    ) -> StateGraph:
        """Same as ``add_conditional_edges(START, path, path_map)``."""
        return self.add_conditional_edges(START, path, path_map)

    def set_finish_point(self, key: str) -> StateGraph:
        """Same as ``add_edge(key, END)``."""
        return self.add_edge(key, END)

    def validate(self, interrupt: Sequence[str] | None = None) -> StateGraph:
        """Check every edge, branch and interrupt names a known node and START leads somewhere.

        Raises:
            InvalidGraphError: naming the offending edge, branch or node.
        """
        sources = {src for src, _ in self._all_edges} | set(self.branches)
        sources |= {name for name, spec in self.nodes.items() if spec.ends}
        for source in sources:
            if source != START and source not in self.nodes:
                raise InvalidGraphError(f"found an edge starting at unknown node {source!r}")
        if START not in sources:
            raise InvalidGraphError(
                "graph has no entry point: add an edge from START, e.g. add_edge(START, 'first_node')"
            )
        targets = {end for _, end in self._all_edges}
        for start, branches in self.branches.items():
            for cond, branch in branches.items():
                for end in branch.targets:
                    if end not in self.nodes and end != END:
                        raise InvalidGraphError(
                            f"branch {cond!r} at node {start!r} targets unknown node {end!r}"
                        )
        for spec in self.nodes.values():
            if spec.ends:
                targets.update(spec.ends)
        for target in targets:
            if target not in self.nodes and target != END:
                raise InvalidGraphError(f"found an edge ending at unknown node {target!r}")
        for node in interrupt or ():
            if node not in self.nodes:
                raise InvalidGraphError(f"interrupt node {node!r} is not a node of this graph")
        self.compiled = True
        return self

    def compile(
        self,
        checkpointer: Any = None,
        *,
        cache: Any = None,
        store: Any = None,
        interrupt_before: Any = None,
        interrupt_after: Any = None,
        debug: bool = False,
        name: str | None = None,
    ) -> CompiledStateGraph:
        """Validate and build the runnable graph.

        Args:
            checkpointer: a saver; ``None`` inherits the parent's when used as a
                subgraph, ``True`` keeps its own persistent namespace, ``False`` disables.
            interrupt_before / interrupt_after: node names (or ``"*"``) to pause at.
            name: graph name used in streams and drawings.

        Raises:
            InvalidGraphError: the graph does not validate.
        """
        from threadloom.graph.compile import compile_state_graph
        from threadloom.graph.node_policies import apply_defaults, attach_policies

        apply_defaults(self)
        compiled = compile_state_graph(
            self,
            checkpointer=checkpointer,
            cache=cache,
            store=store,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            debug=debug,
            name=name,
        )
        attach_policies(self, compiled)
        return compiled


def __getattr__(name: str) -> object:
    # LangGraph code imports CompiledStateGraph from graph.state; it lives in compile.py
    # (which imports this module), so it is resolved lazily.
    if name == "CompiledStateGraph":
        from threadloom.graph.compile import CompiledStateGraph

        return CompiledStateGraph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_OLD_NAMES = {"config_schema": "context_schema", "input": "input_schema", "output": "output_schema"}


def _old_names(
    deprecated: dict[str, Any], context: Any, input_: Any, output: Any
) -> tuple[Any, Any, Any]:
    """LangGraph's earlier keyword names (``config_schema=``, ``input=``,
    ``output=``), still accepted there with a deprecation warning: a ported
    program keeps working, and the warning names the new keyword."""
    import warnings

    unknown = sorted(set(deprecated) - set(_OLD_NAMES))
    if unknown:
        raise TypeError(f"StateGraph() got unexpected keyword argument(s) {unknown}")
    given = {"context_schema": context, "input_schema": input_, "output_schema": output}
    for old, new in _OLD_NAMES.items():
        if old in deprecated:
            warnings.warn(
                f"StateGraph({old}=...) is deprecated; use {new}=...",
                DeprecationWarning,
                stacklevel=3,
            )
            if given[new] is None:
                given[new] = deprecated[old]
    return given["context_schema"], given["input_schema"], given["output_schema"]

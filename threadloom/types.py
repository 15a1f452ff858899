"""The values users pass to and get back from graphs.

``Send``, ``Command``, ``Interrupt``, ``StateSnapshot`` and ``PregelTask`` are
stored inside checkpoints, so their fields and names are part of the stored format
(the serializer registers them by name). Everything here is plain data; the
behaviour lives in :mod:`threadloom.pregel`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, NamedTuple, TypeVar

from xxhash import xxh3_128_hexdigest

from threadloom.constants import NS_SEP
from threadloom.policies import CachePolicy, RetryPolicy, TimeoutPolicy, default_retry_on
from threadloom.stream_parts import (
    CheckpointPayload,
    CheckpointStreamPart,
    CheckpointTask,
    CustomStreamPart,
    DebugPayload,
    DebugStreamPart,
    MessagesStreamPart,
    StreamPart,
    TaskPayload,
    TaskResultPayload,
    TasksStreamPart,
    UpdatesStreamPart,
    ValuesStreamPart,
)
from threadloom.trace_policy import TracePolicy, omit_payload

if TYPE_CHECKING:
    from threadloom.checkpoint.base import CheckpointMetadata
    from threadloom.pregel.task import PregelExecutableTask

__all__ = [
    "All",
    "CachePolicy",
    "CheckpointPayload",
    "CheckpointStreamPart",
    "CheckpointTask",
    "Checkpointer",
    "Command",
    "CustomStreamPart",
    "DebugPayload",
    "DebugStreamPart",
    "Durability",
    "GraphOutput",
    "Interrupt",
    "MessagesStreamPart",
    "Overwrite",
    "PregelExecutableTask",
    "PregelTask",
    "RetryPolicy",
    "Send",
    "StateSnapshot",
    "StateUpdate",
    "StreamMode",
    "StreamPart",
    "StreamWriter",
    "TaskPayload",
    "TaskResultPayload",
    "TasksStreamPart",
    "TimeoutPolicy",
    "TracePolicy",
    "UpdatesStreamPart",
    "ValuesStreamPart",
    "default_retry_on",
    "ensure_valid_checkpointer",
    "interrupt",
    "omit_payload",
]

All = Literal["*"]
"""Interrupt before/after every node."""

StreamMode = Literal["values", "updates", "checkpoints", "tasks", "debug", "messages", "custom"]
"""How :meth:`Pregel.stream` reports progress."""

Durability = Literal["sync", "async", "exit"]
"""When checkpoints reach the saver: before the next step (sync), alongside it
(async, the default), or only when the run ends (exit)."""

StreamWriter = Callable[[Any], None]
"""Callable a node uses to emit ``custom`` stream events."""

Checkpointer = Any
"""``None`` (inherit the parent's), ``True`` (own namespace, persistent), ``False``
(no checkpoints) or a saver instance."""


_SAVER_CALLS = ("get_tuple", "list", "put", "put_writes")


def _callable_on(obj: Any) -> Callable[[str], bool]:
    return lambda name: callable(getattr(obj, name, None))


def ensure_valid_checkpointer(checkpointer: Checkpointer) -> Checkpointer:
    """``checkpointer`` if it is one of the forms :data:`Checkpointer` allows.

    Checked when a graph is compiled: a wrong object (a path, a connection, a
    saver class instead of an instance) used to surface only at the first save,
    as an AttributeError from inside the run.

    Raises:
        TypeError: anything else (the type LangGraph raises here).
    """
    from threadloom.checkpoint.saver import BaseCheckpointSaver

    if checkpointer is None or checkpointer is True or checkpointer is False:
        return checkpointer  # by identity: 1 == True, yet 1 is no checkpointer
    if isinstance(checkpointer, BaseCheckpointSaver) or (
        not isinstance(checkpointer, type) and all(map(_callable_on(checkpointer), _SAVER_CALLS))
    ):
        return checkpointer  # a saver, or a proxy standing in for one
    got = (
        f"the class {checkpointer.__name__} (pass an instance)"
        if isinstance(checkpointer, type)
        else type(checkpointer).__name__
    )
    raise TypeError(
        "checkpointer must be a saver instance (InMemorySaver, SqliteSaver, ...), True, "
        f"False or None; got {got}"
    )


RunnableConfig = dict[str, Any]

_O = TypeVar("_O")


_DEFAULT_INTERRUPT_ID = "placeholder-id"


def _old_interrupt_kwargs(interrupt: Interrupt, given: dict[str, Any]) -> None:
    """Keywords ``Interrupt`` took before LangGraph 0.6 (``ns``, ``when``,
    ``resumable``, ...): ignored, silently, as LangGraph still does, except that an
    ``ns`` given to an interrupt without an ``id`` makes LangGraph's id from it
    (a str too, joined character by character as LangGraph joins it)."""
    ns = given.get("ns")
    if interrupt.id == _DEFAULT_INTERRUPT_ID and isinstance(ns, Sequence):
        interrupt.id = xxh3_128_hexdigest("|".join(ns).encode())


def interrupt_id(ns: str, answered: int = 0) -> str:
    """Stable id of the interrupt that fills answer slot ``answered`` of task ``ns``."""
    return xxh3_128_hexdigest((f"{ns}{NS_SEP}{answered}" if answered else ns).encode())


_R = TypeVar("_R")


@dataclass(init=False, eq=False, repr=False, slots=True)
class Interrupt(Generic[_R]):
    """A pause raised by a node, waiting for ``Command(resume=...)``.

    ``id`` is stable across re-runs of the same task, so a resume map
    ``{interrupt.id: answer}`` addresses exactly this pause. ``response_schema``
    is the JSON Schema of the answer the node expects (``interrupt(...,
    response_schema=...)``), for clients that render a form; None when the
    node gave none. A dataclass, as LangGraph's: servers answer with
    ``dataclasses.asdict(interrupt)``.
    """

    value: Any
    id: str
    response_schema: Any

    def __init__(
        self,
        value: Any,
        id: str = _DEFAULT_INTERRUPT_ID,
        *,
        response_schema: Any = None,
        **deprecated: Any,
    ) -> None:
        self.value = value
        self.id = id
        self.response_schema = response_schema
        if deprecated:
            _old_interrupt_kwargs(self, deprecated)

    @classmethod
    def from_ns(
        cls, value: Any, ns: str, answered: int = 0, *, response_schema: Any = None
    ) -> Interrupt:
        return cls(value=value, id=interrupt_id(ns, answered), response_schema=response_schema)

    @property
    def interrupt_id(self) -> str:
        """The old name of :attr:`id` (deprecated in LangGraph 1.0, still read by older code)."""
        import warnings

        warnings.warn("`interrupt_id` is deprecated; use `id`", DeprecationWarning, stacklevel=2)
        return self.id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interrupt) and (
            self.value,
            self.id,
            self.response_schema,
        ) == (other.value, other.id, other.response_schema)

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return (
            f"Interrupt(value={self.value!r}, id={self.id!r}, "
            f"response_schema={self.response_schema!r})"
        )


@dataclass(frozen=True)
class GraphOutput(Generic[_O]):
    """What ``invoke(..., version="v2")`` returns: the output and the interrupts
    the run stopped at, as two fields instead of an ``__interrupt__`` key mixed
    into the state."""

    value: _O
    interrupts: tuple[Interrupt, ...] = ()

    def __getitem__(self, key: str) -> Any:
        """v1-style access, kept for code moving over; use ``.value`` / ``.interrupts``."""
        _v1_access_warning()
        if key == "__interrupt__":
            return self.interrupts
        if isinstance(self.value, dict):
            return self.value[key]
        try:
            return getattr(self.value, key)
        except AttributeError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        _v1_access_warning()
        if key == "__interrupt__":
            return bool(self.interrupts)
        if isinstance(self.value, dict):
            return key in self.value
        return isinstance(key, str) and hasattr(self.value, key)


def _v1_access_warning() -> None:
    import warnings

    warnings.warn(
        "GraphOutput: use `.value` for the output and `.interrupts` for interrupts "
        "instead of `result[key]` / `key in result`",
        DeprecationWarning,
        stacklevel=3,
    )


class StateUpdate(NamedTuple):
    """One update in :meth:`Pregel.bulk_update_state`."""

    values: dict[str, Any] | Any | None
    as_node: str | None = None
    task_id: str | None = None


class PregelTask(NamedTuple):
    """A task of a step, as :class:`StateSnapshot` shows it."""

    id: str
    name: str
    path: tuple[str | int | tuple, ...]
    error: Exception | None = None
    interrupts: tuple[Interrupt, ...] = ()
    state: None | RunnableConfig | StateSnapshot = None
    result: Any | None = None


class StateSnapshot(NamedTuple):
    """The state of a thread at the start of a step."""

    values: dict[str, Any] | Any
    next: tuple[str, ...]
    config: RunnableConfig
    metadata: CheckpointMetadata | None
    created_at: str | None
    parent_config: RunnableConfig | None
    tasks: tuple[PregelTask, ...]
    interrupts: tuple[Interrupt, ...] = ()


class Send:
    """Run ``node`` in the next step with ``arg`` as its input (a PUSH task).

    Used for map-reduce: a conditional edge returns one ``Send`` per item.
    ``timeout`` (seconds, a ``timedelta`` or a :class:`TimeoutPolicy`) limits
    this one task instead of the node's own ``add_node(timeout=)``.
    """

    __slots__ = ("node", "arg", "timeout")

    def __init__(
        self,
        /,
        node: str,
        arg: Any,
        *,
        timeout: float | timedelta | TimeoutPolicy | None = None,
    ) -> None:
        # a str Enum member names the node it equals (its hash and format differ)
        self.node = str.__str__(node) if isinstance(node, str) and type(node) is not str else node
        self.arg = arg
        self.timeout = TimeoutPolicy.coerce(timeout)

    def __hash__(self) -> int:
        return hash((self.node, repr(self.arg), self.timeout))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Send)
            and self.node == other.node
            and self.arg == other.arg
            and self.timeout == other.timeout
        )

    def __repr__(self) -> str:
        if self.timeout is None:
            return f"Send(node={self.node!r}, arg={self.arg!r})"
        return f"Send(node={self.node!r}, arg={self.arg!r}, timeout={self.timeout!r})"


N = TypeVar("N", bound=Hashable)


@dataclass(frozen=True, slots=True, kw_only=True)
class Command(Generic[N]):
    """Update state, resume an interrupt and/or choose the next nodes in one value.

    ``graph=Command.PARENT`` sends the command to the closest parent graph.
    ``resume`` is either one value for the next pending interrupt or a map
    ``{interrupt_id: value}``.
    """

    graph: str | None = None
    update: Any | None = None
    resume: dict[str, Any] | Any | None = None
    goto: Send | Sequence[Send | N] | N = ()

    PARENT: ClassVar[Literal["__parent__"]] = "__parent__"

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={value!r}"
            for name, value in (
                ("graph", self.graph),
                ("update", self.update),
                ("resume", self.resume),
                ("goto", self.goto),
            )
            if value
        )
        return f"Command({fields})"

    def _update_as_tuples(self) -> Sequence[tuple[str, Any]]:
        """The update as (key, value) pairs, whatever shape it was given in."""
        update = self.update
        if update is None:
            return []
        if isinstance(update, dict):
            return list(update.items())
        if isinstance(update, (list, tuple)) and all(
            isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str) for t in update
        ):
            return list(update)
        if hasattr(update, "__dataclass_fields__") or hasattr(update, "model_fields"):
            from threadloom.graph.schema import fields_of  # lazy: graph depends on types

            return [(k, getattr(update, k)) for k in fields_of(type(update))]
        return [("__root__", update)]


class Overwrite:
    """Write ``value`` to a reducer channel as is, bypassing the reducer."""

    __slots__ = ("value",)

    type: ClassVar[str] = "__overwrite__"
    """What the JSON form ``{"type": "__overwrite__", "value": ...}`` names, as
    LangGraph's field; the reducer channels recognise that form too."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Overwrite) and self.value == other.value

    def __repr__(self) -> str:
        return f"Overwrite(value={self.value!r}, type='__overwrite__')"


def interrupt(value: Any, *, response_schema: Any = None) -> Any:
    """Pause the current node and surface ``value`` to the caller.

    The first time it runs it raises :class:`~threadloom.errors.GraphInterrupt`;
    when the thread is resumed with ``Command(resume=answer)`` the node re-runs
    from its start and this call returns ``answer``. Needs a checkpointer.

    ``response_schema``: what the answer must look like. A JSON Schema ``dict``
    is only shown to clients (``Interrupt.response_schema``); a Pydantic model,
    ``TypedDict`` or dataclass is shown as its JSON Schema and also validates
    the answer, and the validated object is what this call returns. A wrong
    answer raises ``pydantic.ValidationError`` (``errors.is_invalid_resume``
    tells it apart) and leaves the interrupt open to be answered again.
    """
    from threadloom.pregel.interrupts import interrupt as _interrupt

    return _interrupt(value, response_schema=response_schema)


def __getattr__(name: str) -> Any:
    # the runtime's task class lives with the runtime, which imports this module
    if name == "PregelExecutableTask":
        from threadloom.pregel.task import PregelExecutableTask

        return PregelExecutableTask
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

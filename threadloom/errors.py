"""Every error threadloom raises on purpose.

The tree, so callers can catch at the level they care about::

    ThreadloomError
    ├── ConfigError                  bad or missing config (thread_id, ...)
    ├── CheckpointerRequiredError    resume/update/history asked of a graph with no saver
    ├── CheckpointNotFoundError      an explicit checkpoint_id that does not exist
    ├── SerializationError           a value that cannot be stored or revived
    │   └── CorruptBlobError         stored bytes that do not decode
    ├── StorageError                 a backend refused (not SQLite, schema too new)
    │   ├── SaverClosedError         a saver used after close() closed its connection
    │   ├── EventLoopCallError       an async saver's sync method called on its own loop
    │   └── ImportConflictError      import_langgraph into a thread that went its own way
    ├── ThreadBusyError              another run holds the thread
    │   └── LeaseLostError           our lease expired or was taken over
    ├── EmptyChannelError            reading a channel that was never written
    ├── InvalidUpdateError           a write the graph cannot accept
    ├── EmptyInputError              a graph invoked with no input
    ├── TaskNotFound                 a task id that is not part of the step
    ├── UnknownInterruptError        a resume aimed at no (or an ambiguous) interrupt
    ├── GraphRecursionError          recursion_limit reached (also a RecursionError)
    ├── NodeTimeoutError             a node attempt exceeded its run or idle timeout
    └── NodeCancelledError           a node raised asyncio.CancelledError itself

Control-flow signals are not errors and live on their own root so that
``except ThreadloomError`` never swallows them::

    GraphBubbleUp
    ├── GraphInterrupt               a node paused for a human
    │   └── NodeInterrupt            (legacy) raised from inside a node
    └── ParentCommand                a Command aimed at the parent graph
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from threadloom.checkpoint.serde.exceptions import RevivedError
    from threadloom.types import Command, Interrupt

__all__ = [
    "ErrorCode",
    "create_error_message",
    "ThreadloomError",
    "ConfigError",
    "IdListError",
    "InvalidGraphError",
    "CheckpointerRequiredError",
    "CheckpointNotFoundError",
    "SerializationError",
    "CorruptBlobError",
    "StorageError",
    "SaverClosedError",
    "EventLoopCallError",
    "ImportConflictError",
    "ThreadBusyError",
    "LeaseLostError",
    "EmptyChannelError",
    "InvalidUpdateError",
    "InvalidRouteError",
    "UnknownRouteError",
    "EmptyInputError",
    "TaskNotFound",
    "UnknownInterruptError",
    "GraphRecursionError",
    "MermaidRenderError",
    "NodeCancelledError",
    "NodeError",
    "NodeTimeoutError",
    "GraphBubbleUp",
    "GraphInterrupt",
    "GraphDrained",
    "NodeInterrupt",
    "ParentCommand",
    "RevivedError",
    "is_invalid_resume",
]


class ErrorCode(Enum):
    """LangGraph's troubleshooting codes, for code that builds or matches its messages."""

    GRAPH_RECURSION_LIMIT = "GRAPH_RECURSION_LIMIT"
    INVALID_CONCURRENT_GRAPH_UPDATE = "INVALID_CONCURRENT_GRAPH_UPDATE"
    INVALID_GRAPH_NODE_RETURN_VALUE = "INVALID_GRAPH_NODE_RETURN_VALUE"
    MULTIPLE_SUBGRAPHS = "MULTIPLE_SUBGRAPHS"
    INVALID_CHAT_HISTORY = "INVALID_CHAT_HISTORY"


def create_error_message(*, message: str, error_code: ErrorCode) -> str:
    """``message`` followed by the troubleshooting page of ``error_code``, as LangGraph
    words it (the codes and their pages are LangGraph's)."""
    return (
        f"{message}\nFor troubleshooting, visit: "
        f"https://docs.langchain.com/oss/python/langgraph/errors/{error_code.value}"
    )


class ThreadloomError(Exception):
    """Root of every error threadloom raises deliberately."""


class ConfigError(ThreadloomError, ValueError):
    """The config lacks something required (``thread_id``) or holds a bad value.

    Subclasses ValueError so code written for LangGraph's ValueError still catches it.
    """


class IdListError(ConfigError, TypeError):
    """One id passed where a list of ids belongs (``prune("chat-1")``).

    A ``TypeError`` as LangGraph's ``prune`` raises for it, and still a
    ``ConfigError`` (a ``ValueError``) for code written against threadloom."""


class MermaidRenderError(ThreadloomError, ValueError):
    """``draw_mermaid_png``'s web API did not return a PNG (no network, an error
    status). A ValueError, as LangChain's is."""


class InvalidGraphError(ThreadloomError, ValueError):
    """The graph as declared cannot run: unknown node, duplicate, reserved name, no entry.

    A ValueError too, so code written against LangGraph keeps catching it.
    """


class CheckpointerRequiredError(ThreadloomError, RuntimeError):
    """The operation needs a checkpointer (``Command(resume=...)``, state history, ...).

    Subclasses RuntimeError, which LangGraph raises here, so ported handlers still match.
    """


class CheckpointNotFoundError(ThreadloomError, LookupError):
    """An explicit ``checkpoint_id`` names no stored checkpoint."""

    def __init__(self, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "") -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_ns = checkpoint_ns
        ns = f" (namespace {checkpoint_ns!r})" if checkpoint_ns else ""
        super().__init__(f"thread {thread_id!r}{ns} has no checkpoint {checkpoint_id!r}")


class SerializationError(ThreadloomError, TypeError):
    """A value cannot be serialized or revived.

    ``path`` says where inside the state the value sits (``messages[3].metadata``),
    ``type_name`` names its type.
    """

    def __init__(self, message: str, *, path: str = "", type_name: str = "") -> None:
        self.path = path
        self.type_name = type_name
        super().__init__(message)

    def under(self, prefix: str) -> SerializationError:
        """The same error with ``path`` seen from ``prefix`` (a channel name, say).

        The serializer only sees one value; the storage layer knows which state key
        it belongs to, so ``[3].when`` becomes ``messages[3].when``.
        """
        old = self.path or "<root>"
        path = prefix + (
            self.path if self.path.startswith("[") or not self.path else "." + self.path
        )
        message = str(self).replace(f"at {old}", f"at {path}", 1)
        err = SerializationError(message, path=path, type_name=self.type_name)
        err.__cause__ = self.__cause__
        return err


class CorruptBlobError(SerializationError):
    """Stored bytes could not be decoded; names where they came from."""

    def __init__(
        self,
        message: str,
        *,
        thread_id: str | None = None,
        checkpoint_id: str | None = None,
        channel: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.channel = channel
        where = ", ".join(
            f"{k} {v!r}"
            for k, v in (
                ("thread", thread_id),
                ("checkpoint", checkpoint_id),
                ("channel", channel),
            )
            if v is not None
        )
        super().__init__(f"{message} ({where})" if where else message)


class StorageError(ThreadloomError):
    """A storage backend cannot be used: not a database, schema too new, unreachable."""


class SaverClosedError(StorageError):
    """The saver closed the connection, pool or client it opened itself, so it
    refuses every further call instead of silently reconnecting (a connection
    nobody would close). ``thread_id``: a run that was still writing through the
    saver when it closed (its lease was released by that close)."""

    def __init__(self, saver: str, thread_id: str | None = None) -> None:
        self.saver = saver
        self.thread_id = thread_id
        if thread_id is None:
            message = f"{saver} is closed; open a new saver to use the database again"
        else:
            message = (
                f"{saver} was closed while the run on thread {thread_id!r} was still"
                " writing through it: the run cannot save further steps (its lease"
                " was released at close; its earlier steps are saved)"
            )
        super().__init__(message)

    def __reduce__(self) -> Any:  # rebuilt from its fields, not from the message
        return (SaverClosedError, (self.saver, self.thread_id))


class EventLoopCallError(StorageError, asyncio.InvalidStateError):
    """An async saver's sync method called where it cannot run: on the saver's own
    event loop (it would deadlock) or with no loop running it. Also the
    ``asyncio.InvalidStateError`` LangGraph raises there, so its handlers match."""


class ImportConflictError(StorageError):
    """``import_langgraph`` found threads in the target holding checkpoints the
    source does not have: threadloom threads of the same id, or imported threads
    continued in threadloom after an earlier import. Importing would make the
    source's checkpoints their latest state; nothing of them is written (the
    other threads are imported first, see ``result``)."""

    def __init__(self, message: str, *, thread_id: str) -> None:
        self.thread_id = thread_id  # the first one
        self.thread_ids: list[str] = [thread_id]  # all of them
        self.result: Any = None  # the ImportResult of the threads that did come over
        super().__init__(message)


class ThreadBusyError(ThreadloomError):
    """Another run holds the thread's lease."""

    def __init__(
        self, thread_id: str, holder: str | None = None, message: str | None = None
    ) -> None:
        self.thread_id = thread_id
        self.holder = holder
        if message is None:
            message = f"thread {thread_id!r} is busy" + (
                f" (held by run {holder!r})" if holder else ""
            )
        super().__init__(message)


class LeaseLostError(ThreadBusyError):
    """This writer's lease expired or was taken over; nothing was written."""


class EmptyChannelError(ThreadloomError):
    """A channel was read before anything was written to it."""


class InvalidUpdateError(ThreadloomError):
    """A write the graph cannot accept (two values for a LastValue, an unknown key, ...)."""


class InvalidRouteError(InvalidUpdateError, ValueError):
    """A routing function returned no destination (``None``, ``START``).

    Also a ValueError: LangGraph raises ValueError here, so ported ``except``
    clauses keep catching it."""


class UnknownRouteError(InvalidUpdateError, KeyError):
    """A routing function returned a key its ``path_map`` does not have.

    Also a KeyError, as LangGraph raises."""

    def __str__(self) -> str:  # the message as written, not KeyError's repr of it
        return Exception.__str__(self)


class EmptyInputError(ThreadloomError):
    """The graph was invoked with empty input."""


class TaskNotFound(ThreadloomError):
    """A task id named by the caller is not part of the step."""


class UnknownInterruptError(ThreadloomError, RuntimeError):
    """A resume value addresses no pending interrupt, or several ambiguously.

    Subclasses RuntimeError, which LangGraph raises for the ambiguous case.
    """


class GraphRecursionError(ThreadloomError, RecursionError):
    """The graph ran ``recursion_limit`` supersteps without finishing.

    Raise the limit through ``config={"recursion_limit": n}`` if the loop is expected.
    """


class NodeTimeoutError(ThreadloomError):
    """A node attempt exceeded its ``run_timeout`` or went ``idle_timeout`` seconds
    without progress (``add_node(..., timeout=)``).

    Not a ``TimeoutError`` (an ``OSError``, which the default ``RetryPolicy``
    never retries), so a retry policy retries a timed-out attempt, as LangGraph.
    ``kind`` ("run"/"idle") and ``timeout`` say which limit fired; both limits
    are the configured ones (None when unset); ``elapsed`` is in seconds.
    """

    def __init__(
        self,
        node: str,
        elapsed: float,
        *,
        kind: Literal["idle", "run"],
        idle_timeout: float | None = None,
        run_timeout: float | None = None,
    ) -> None:
        if kind == "idle":
            if idle_timeout is None:
                raise ValueError("idle_timeout is required when kind='idle'")
            self.timeout = idle_timeout
            message = (
                f"Node '{node}' exceeded its idle timeout of {idle_timeout:.3f}s "
                f"without making progress (elapsed: {elapsed:.3f}s)."
            )
        elif kind == "run":
            if run_timeout is None:
                raise ValueError("run_timeout is required when kind='run'")
            self.timeout = run_timeout
            message = (
                f"Node '{node}' exceeded its run timeout of {run_timeout:.3f}s "
                f"(elapsed: {elapsed:.3f}s)."
            )
        else:
            raise ValueError("kind must be 'idle' or 'run'")
        super().__init__(message)
        self.node = node
        self.elapsed = elapsed
        self.kind = kind
        self.idle_timeout = idle_timeout
        self.run_timeout = run_timeout

    def __reduce__(self) -> Any:  # keyword-only fields: rebuild from them, not from args
        return (
            _node_timeout_error,
            (self.node, self.elapsed, self.kind, self.idle_timeout, self.run_timeout),
        )


def _node_timeout_error(
    node: str, elapsed: float, kind: Any, idle: float | None, run: float | None
) -> NodeTimeoutError:
    return NodeTimeoutError(node, elapsed, kind=kind, idle_timeout=idle, run_timeout=run)


@dataclass(frozen=True, slots=True)
class NodeError:
    """What an error handler is told (not an exception): the failed node and its error.

    A handler registered with ``add_node(..., error_handler=h)`` or
    ``set_node_defaults(error_handler=h)`` receives it in a parameter
    ``error: NodeError`` (that name and annotation, as in LangGraph).
    """

    node: str
    error: BaseException


class NodeCancelledError(ThreadloomError):
    """A node's own code raised ``asyncio.CancelledError`` (nobody cancelled it):
    reported as the node's failure, where a bare cancel would end the run as if
    it had been stopped on purpose (as LangGraph)."""

    def __init__(self, node: str, message: str | None = None) -> None:
        super().__init__(message or f"Node {node!r} raised asyncio.CancelledError")
        self.node = node


class GraphBubbleUp(Exception):
    """Root of control-flow signals that travel up through nodes; never a failure."""


class GraphInterrupt(GraphBubbleUp):
    """A node paused; ``args[0]`` is the tuple of :class:`Interrupt`."""

    def __init__(self, interrupts: Sequence[Interrupt] | Any = ()) -> None:
        super().__init__(interrupts)

    @property
    def interrupts(self) -> Any:
        return self.args[0] if self.args else ()


class GraphDrained(GraphBubbleUp):
    """The run stopped at a step boundary because its ``RunControl`` asked it to
    drain (a deploy's SIGTERM handler, say). Not a failure: every finished step
    is saved and ``invoke(None, config)`` continues where it stopped."""

    def __init__(self, reason: str = "shutdown") -> None:
        self.reason = reason
        super().__init__(f"Graph drained: {reason}")

    def __reduce__(self) -> Any:  # picklable with its reason (the message is derived)
        return (type(self), (self.reason,))


class NodeInterrupt(GraphInterrupt):
    """Legacy: raised by a node to interrupt with a value."""

    def __init__(self, value: Any, id: str | None = None) -> None:
        from threadloom.types import Interrupt

        interrupt = Interrupt(value=value) if id is None else Interrupt(value=value, id=id)
        super().__init__([interrupt])


class ParentCommand(GraphBubbleUp):
    """Carries a ``Command(graph=Command.PARENT)`` up to the parent graph."""

    def __init__(self, command: Command) -> None:
        super().__init__(command)


_INVALID_RESUME = "_threadloom_invalid_resume"


def mark_invalid_resume(error: BaseException) -> None:
    """Tag the ``pydantic.ValidationError`` a ``response_schema`` raised for a bad answer."""
    setattr(error, _INVALID_RESUME, True)


def is_invalid_resume(error: BaseException) -> bool:
    """Whether ``error`` is an answer to ``interrupt(..., response_schema=...)``
    that did not validate (the interrupt stays open), as opposed to a node's
    own failure. LangGraph's tag counts too: the same graph may run on either."""
    return (
        getattr(error, _INVALID_RESUME, False) is True
        or getattr(error, "_langgraph_invalid_resume", False) is True
    )


def __getattr__(name: str) -> Any:
    # RevivedError lives with the serializer that makes it (which imports this
    # module); it is named here lazily so ``from threadloom.errors import
    # RevivedError`` works like every other documented error
    if name == "RevivedError":
        from threadloom.checkpoint.serde.exceptions import RevivedError

        return RevivedError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

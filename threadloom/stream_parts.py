"""The shapes of ``stream(..., version="v2")`` items and of the ``tasks``,
``checkpoints`` and ``debug`` payloads, as typed dicts.

They only describe data (the runtime builds plain dicts), so that code typed
against LangGraph's ``langgraph.types.ValuesStreamPart`` and friends ports by
renaming the import and a type checker still narrows on ``part["type"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Literal, TypedDict, TypeVar, Union

from typing_extensions import NotRequired

if TYPE_CHECKING:
    from threadloom.types import Interrupt, StateSnapshot

__all__ = [
    "CheckpointPayload",
    "CheckpointStreamPart",
    "CheckpointTask",
    "CustomStreamPart",
    "DebugPayload",
    "DebugStreamPart",
    "MessagesStreamPart",
    "StreamPart",
    "TaskPayload",
    "TaskResultPayload",
    "TasksStreamPart",
    "UpdatesStreamPart",
    "ValuesStreamPart",
]

StateT = TypeVar("StateT")
OutputT = TypeVar("OutputT")


class TaskPayload(TypedDict):
    """A task starting (``tasks`` mode)."""

    id: str
    name: str
    input: Any
    triggers: list[str]
    metadata: NotRequired[dict[str, Any]]


class TaskResultPayload(TypedDict):
    """A task finishing (``tasks`` mode): its writes, or its error, or its interrupts."""

    id: str
    name: str
    error: str | None
    interrupts: list[dict[str, Any]]
    result: dict[str, Any]


class CheckpointTask(TypedDict):
    """A task listed in a ``checkpoints`` payload; which keys appear depends on
    whether it failed, finished or is still pending."""

    id: str
    name: str
    error: NotRequired[str]
    result: NotRequired[Any]
    interrupts: NotRequired[list[dict[str, Any]]]
    state: StateSnapshot | dict[str, Any] | None


class CheckpointPayload(TypedDict, Generic[StateT]):
    """A checkpoint as ``checkpoints`` mode reports it (the fields of ``get_state()``)."""

    config: dict[str, Any] | None
    metadata: dict[str, Any]
    values: StateT
    next: list[str]
    parent_config: dict[str, Any] | None
    tasks: list[CheckpointTask]


class _DebugCheckpoint(TypedDict, Generic[StateT]):
    step: int
    timestamp: str
    type: Literal["checkpoint"]
    payload: CheckpointPayload[StateT]


class _DebugTask(TypedDict):
    step: int
    timestamp: str
    type: Literal["task"]
    payload: TaskPayload


class _DebugTaskResult(TypedDict):
    step: int
    timestamp: str
    type: Literal["task_result"]
    payload: TaskResultPayload


DebugPayload = Union[_DebugCheckpoint[Any], _DebugTask, _DebugTaskResult]
"""A ``debug`` event; discriminate on ``type``."""


class ValuesStreamPart(TypedDict, Generic[OutputT]):
    type: Literal["values"]
    ns: tuple[str, ...]
    data: OutputT
    interrupts: tuple[Interrupt, ...]


class UpdatesStreamPart(TypedDict):
    type: Literal["updates"]
    ns: tuple[str, ...]
    data: dict[str, Any]


class MessagesStreamPart(TypedDict):
    type: Literal["messages"]
    ns: tuple[str, ...]
    data: tuple[Any, dict[str, Any]]


class CustomStreamPart(TypedDict):
    type: Literal["custom"]
    ns: tuple[str, ...]
    data: Any


class CheckpointStreamPart(TypedDict, Generic[StateT]):
    type: Literal["checkpoints"]
    ns: tuple[str, ...]
    data: CheckpointPayload[StateT]


class TasksStreamPart(TypedDict):
    type: Literal["tasks"]
    ns: tuple[str, ...]
    data: TaskPayload | TaskResultPayload


class DebugStreamPart(TypedDict):
    type: Literal["debug"]
    ns: tuple[str, ...]
    data: DebugPayload


StreamPart = Union[
    ValuesStreamPart[Any],
    UpdatesStreamPart,
    MessagesStreamPart,
    CustomStreamPart,
    CheckpointStreamPart[Any],
    TasksStreamPart,
    DebugStreamPart,
]
"""One item of ``stream(..., version="v2")``: ``{"type": <stream mode>, "ns":
<namespace tuple>, "data": <payload>}``, plus ``"interrupts"`` on ``values``
parts (see :mod:`threadloom.pregel.v2`). Discriminate on ``type``."""

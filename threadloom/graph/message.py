"""Chat-message state: the ``add_messages`` reducer and ``MessagesState``.

Messages are plain dicts (``{"role": "user", "content": "hi", "id": "..."}``) so
threadloom needs no LLM library. When the caller uses langchain_core message
objects they are kept as they are (duck-typed: ``.id`` and ``.type``), so the
same state works with either; langchain_core is never imported here. A list
holding a langchain object gets its dicts (and tuples, strings) converted to
langchain messages, as LangGraph does, so one history is one kind.

Merging by id is what makes conversations editable: a message whose id is
already present replaces the old one, ``RemoveMessage(id)`` deletes it and
``RemoveMessage(REMOVE_ALL_MESSAGES)`` clears the history.
"""

from __future__ import annotations

import sys
import uuid
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

if TYPE_CHECKING:
    from threadloom.graph.message_graph import MessageGraph

__all__ = [
    "REMOVE_ALL_MESSAGES",
    "AnyMessage",
    "MessageGraph",
    "Messages",
    "MessagesState",
    "RemoveMessage",
    "add_messages",
    "push_message",
]

REMOVE_ALL_MESSAGES = "__remove_all__"
"""Id for ``RemoveMessage`` meaning "drop every message before this one"."""

AnyMessage = Any
"""A message: a dict with ``role``/``content`` (and ``id``) or a langchain_core message."""

Messages = list[AnyMessage] | AnyMessage

_ROLE_ALIASES = {"human": "user", "ai": "assistant"}


class RemoveMessage(dict):
    """Marker that deletes the message with ``id`` when merged by :func:`add_messages`.

    A dict subclass so it reads like any message. The serde registry stores it
    under ``threadloom.RemoveMessage``, so it comes back as a ``RemoveMessage``
    from pending writes and ``update_state``; a plain dict
    ``{"type": "remove", ...}`` is recognised by :func:`add_messages` too.
    """

    def __init__(self, id: str, **kwargs: Any) -> None:
        super().__init__(type="remove", role="remove", content="", id=id, **kwargs)

    @property
    def id(self) -> str:
        return self["id"]

    def __repr__(self) -> str:
        return f"RemoveMessage(id={self['id']!r})"


def _get_id(message: Any) -> str | None:
    if isinstance(message, dict):
        return message.get("id")
    return getattr(message, "id", None)


def _is_remove(message: Any) -> bool:
    if isinstance(message, dict):
        return message.get("type") == "remove"
    return getattr(message, "type", None) == "remove"


def _coerce(message: Any) -> Any:
    """A message in a form the reducer can key by id (dicts copied, objects kept)."""
    if isinstance(message, RemoveMessage):
        return message
    if isinstance(message, dict):
        out = dict(message)
        if "role" not in out and "type" in out and out["type"] != "remove":
            out["role"] = _ROLE_ALIASES.get(out["type"], out["type"])
        return out
    if isinstance(message, str):
        return {"role": "user", "content": message}
    if isinstance(message, (tuple, list)) and len(message) == 2 and isinstance(message[0], str):
        role, content = message
        return {"role": _ROLE_ALIASES.get(role, role), "content": content}
    if hasattr(message, "content"):
        return _chunk_to_message(message)
    raise TypeError(
        f"cannot use {type(message).__name__} as a chat message: expected a dict with "
        "'role' and 'content', a (role, content) tuple, a string or a message object"
    )


def _chunk_to_message(message: Any) -> Any:
    """Streaming chunks (``AIMessageChunk``) become full messages, as LangGraph does."""
    if type(message).__name__.endswith("Chunk"):
        try:
            from langchain_core.messages import message_chunk_to_message
        except ImportError:  # pragma: no cover - chunks only exist with langchain_core
            return message
        return message_chunk_to_message(message)
    return message


def _with_id(message: Any) -> Any:
    if _get_id(message) is not None:
        return message
    new_id = str(uuid.uuid4())
    if isinstance(message, dict):
        return {**message, "id": new_id}
    message.id = new_id  # langchain objects: assigned in place, as LangGraph does
    return message


def _as_list(value: Messages) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, tuple) and not (len(value) == 2 and isinstance(value[0], str)):
        return list(value)
    return [value]


_PLAIN: dict[type, bool] = {}
"""Message classes whose instances the reducer takes as they are once they have
an id (a langchain ``HumanMessage``, not a dict, a tuple or a chunk): the whole
history passes through the reducer on every update, so it is checked by type."""


def _is_plain(message: Any) -> bool:
    kind = type(message)
    plain = _PLAIN.get(kind)
    if plain is None:
        plain = not isinstance(message, (RemoveMessage, dict, str, tuple, list))
        plain = plain and hasattr(message, "content") and _chunk_to_message(message) is message
        # remembered only for classes whose every instance has both fields (pydantic
        # models declaring them, e.g. langchain's); a duck-typed object is checked each time
        fields = getattr(kind, "model_fields", None)
        if fields is not None and "content" in fields and "id" in fields and len(_PLAIN) < 256:
            _PLAIN[kind] = plain
    return plain


_DICTS, _OBJECTS = 1, 2
"""Kinds of messages a list holds (bits): plain dicts, message objects."""


def _prepared(items: list[Any]) -> tuple[list[Any], dict[str | None, int], int]:
    """Each item coerced and given an id, each id's position, and the kinds seen.

    The kinds cost nothing on the fast path: every item not coerced is an
    object, so counting the coerced ones that became dicts (dicts, tuples,
    strings; a chunk becomes a message object) is enough; which of those are dicts :func:`_as_langchain` checks
    item by item, in the rare mixed case only.
    """
    out: list[Any] = []
    position: dict[str | None, int] = {}
    plain = _PLAIN
    coerced = 0
    for i, m in enumerate(items):
        if plain.get(type(m)) and (mid := m.id) is not None:  # (declared field: never missing)
            out.append(m)
        else:
            if _is_plain(m):
                m = _with_id(m)
            else:
                m = _with_id(_coerce(m))
                if type(m) is dict:  # a chunk or a marker coerces to an object, not a dict
                    coerced += 1
            out.append(m)
            mid = _get_id(m)
        position[mid] = i
    objects = len(out) - coerced
    return out, position, (_OBJECTS if objects else 0) | (_DICTS if coerced else 0)


def _kind(message: Any) -> int:
    if isinstance(message, dict):
        return 0 if _is_remove(message) else _DICTS  # a marker never stays in the list
    return _OBJECTS


def _langchain_involved(*sources: list[Any]) -> bool:
    """Whether the inputs hold a langchain_core message (scanned only when mixed)."""
    lc = sys.modules.get("langchain_core.messages")  # loaded if one of its objects exists
    return lc is not None and any(isinstance(m, lc.BaseMessage) for src in sources for m in src)


def _as_langchain(messages: list[Any]) -> list[Any]:
    """The dicts (and tuples, strings coerced to dicts) as langchain messages, ids kept."""
    from langchain_core.messages import convert_to_messages

    return [
        convert_to_messages([m])[0] if isinstance(m, dict) and not _is_remove(m) else m
        for m in messages
    ]


def add_messages(left: Messages, right: Messages) -> list[AnyMessage]:
    """Merge two message lists by id: append new ones, replace same-id ones.

    Messages without an id get a fresh uuid4. ``RemoveMessage(id)`` deletes
    the message with that id; ``RemoveMessage(REMOVE_ALL_MESSAGES)`` discards
    everything before it (``left`` and earlier items of ``right``).

    Raises:
        ValueError: a ``RemoveMessage`` names an id that is not in the list.
        TypeError: an item is not something a message can be made from.
    """
    left_list = _as_list(left)
    merged, position, left_kinds = _prepared(left_list)
    right_list = [_with_id(_coerce(m)) for m in _as_list(right)]
    kinds = left_kinds
    for m in right_list:
        kinds |= _kind(m)
    # one kind per history: with a langchain message among the inputs, dicts convert
    if kinds == _DICTS | _OBJECTS and _langchain_involved(right_list, left_list):
        right_list = _as_langchain(right_list)
        if left_kinds & _DICTS:
            merged = _as_langchain(merged)  # same ids: ``position`` still holds
    for idx in range(len(right_list) - 1, -1, -1):
        m = right_list[idx]
        if _is_remove(m) and _get_id(m) == REMOVE_ALL_MESSAGES:
            return right_list[idx + 1 :]
    removed: set[str] = set()
    for m in right_list:
        mid = _get_id(m)
        existing = position.get(mid)
        if existing is not None:
            if _is_remove(m):
                removed.add(mid)  # type: ignore[arg-type]
            else:
                removed.discard(mid)  # type: ignore[arg-type]
                merged[existing] = m
        elif _is_remove(m):
            raise ValueError(
                f"Attempting to delete a message with an ID that doesn't exist ('{mid}')"
            )
        else:
            position[mid] = len(merged)
            merged.append(m)
    if removed:
        merged = [m for m in merged if _get_id(m) not in removed]
    return merged


class MessagesState(TypedDict):
    """State with one ``messages`` key merged by :func:`add_messages`; subclass to add keys."""

    messages: Annotated[list[AnyMessage], add_messages]


def push_message(message: Any, *, state_key: str | None = "messages") -> Any:
    """From inside a node: send ``message`` to the run's ``messages`` stream now
    (a node that builds a reply by hand streams it before it returns), and write
    it to ``state_key`` (unless None), where ``add_messages`` merges it by id.

    Raises:
        ValueError: the message has no ``id`` (as LangGraph: the stream and the
            state need one to recognise it again).
        RuntimeError: called outside a node.
    """
    from threadloom.pregel.context import current_task
    from threadloom.pregel.messages import find_stream

    scope = current_task()
    if scope is None:
        raise RuntimeError("push_message() must be called from inside a node of a running graph")
    message = _chunk_to_message(_coerce(message)) if not isinstance(message, dict) else message
    if _get_id(message) is None:
        raise ValueError("Message ID is required")
    config = scope.config()
    metadata = config.get("metadata") or {}
    for stream in find_stream(config.get("callbacks")):
        ns = stream._wanted(metadata)
        if ns is not None:
            stream._emit((ns, dict(metadata)), message, dedupe=False)
    if state_key:
        scope.send([(state_key, message)])
    return message


def __getattr__(name: str) -> Any:
    if name == "MessageGraph":  # it subclasses StateGraph, whose module is heavier
        from threadloom.graph.message_graph import MessageGraph

        return MessageGraph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

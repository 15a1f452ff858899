"""``stream_mode="messages"``: LLM token chunks and the messages nodes return.

A run streaming "messages" puts a :class:`MessagesStream` into its config's
callbacks, so every task's config (and a subgraph's run, which inherits the
callbacks) carries it. Two sources feed it:

* node outputs: the runner calls :meth:`MessagesStream.node_start` /
  :meth:`MessagesStream.node_end` around each node; a message in the output
  that the node did not receive, and that was not streamed already, is yielded
  once (dedup by id). Works without LangChain, for dict messages too.
* chat models: when ``langchain_core`` is importable, the stream is also a
  LangChain callback handler (built on the first run streaming "messages": no
  other path imports LangChain); a chat model called inside a node with the node's
  config, or with none (the runner publishes the config in LangChain's context
  variable), reports its token chunks to it.

Each item is ``(namespace, "messages", (message, metadata))``; the metadata is
the node's (``langgraph_step``, ``langgraph_node``, ...) plus the model's
``ls_*`` keys for tokens.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from uuid import uuid4

from threadloom.constants import NS_SEP, PUSH, TAG_HIDDEN, TAG_NOSTREAM
from threadloom.types import Command

__all__ = ["MessagesStream", "find_stream", "make_stream", "child_config_var"]

_ROLES = frozenset(("user", "human", "assistant", "ai", "tool", "system", "function"))
Put = Callable[[tuple[tuple[str, ...], str, Any]], None]


def _is_message(value: Any) -> bool:
    """A LangChain message (only when LangChain is loaded: none exists otherwise) or a
    message-shaped dict (a role or message type, and content)."""
    if isinstance(value, dict):
        return (value.get("role") in _ROLES or value.get("type") in _ROLES) and "content" in value
    module = sys.modules.get("langchain_core.messages")
    return module is not None and isinstance(value, module.BaseMessage)


def _message_id(value: Any) -> Any:
    return value.get("id") if isinstance(value, dict) else value.id


def _state_values(obj: Any) -> Sequence[Any]:
    """Top-level values of a node's input/output (dict, pydantic model, dataclass)."""
    if isinstance(obj, dict):
        return list(obj.values())
    if hasattr(type(obj), "model_fields"):
        return [getattr(obj, k) for k in type(obj).model_fields]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    return ()


def _messages_in(value: Any) -> Iterator[Any]:
    """Messages found in a node's output or input: itself, a list, or state values."""
    if _is_message(value):
        yield value
    elif isinstance(value, Sequence) and not isinstance(value, str):
        yield from (v for v in value if _is_message(v))
    else:
        for v in _state_values(value):
            if _is_message(v):
                yield v
            elif isinstance(v, Sequence) and not isinstance(v, str):
                yield from (item for item in v if _is_message(item))


def graph_namespace(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """The namespace of the graph a task runs in: its checkpoint_ns minus its own
    segment (and one more per enclosing ``PUSH`` call, which nests under its caller)."""
    ns = tuple(str(metadata.get("langgraph_checkpoint_ns", "")).split(NS_SEP))
    path = metadata.get("langgraph_path", ())
    drop = 1
    while len(path) == 4 and path[0] == PUSH and path[-1] is True:
        drop += 1
        path = path[1]
    return ns[:-drop]


class MessagesStream:
    """Streams the messages of one run (and its subgraphs when ``subgraphs``)."""

    run_inline = True  # LangChain: call us in the model's thread, in order

    def __init__(self, put: Put, subgraphs: bool, parent_ns: tuple[str, ...] | None) -> None:
        self.put = put
        self.subgraphs = subgraphs
        self.parent_ns = parent_ns
        self.seen: set[Any] = set()
        self.runs: dict[Any, tuple[tuple[str, ...], dict[str, Any]]] = {}

    def _wanted(self, metadata: Mapping[str, Any]) -> tuple[str, ...] | None:
        ns = graph_namespace(metadata)
        if ns and not self.subgraphs and ns != self.parent_ns:
            return None
        return ns

    def _emit(self, meta: tuple[tuple[str, ...], dict[str, Any]], msg: Any, dedupe: bool) -> None:
        mid = _message_id(msg)
        if dedupe and mid is not None and mid in self.seen:
            return
        if mid is None and not isinstance(msg, dict):
            msg.id = mid = str(uuid4())
        if mid is not None:
            self.seen.add(mid)
        self.put((meta[0], "messages", (msg, meta[1])))

    # -- nodes (called by the runner) ----------------------------------------

    def node_start(
        self, key: Any, config: Mapping[str, Any], tags: Sequence[str], inputs: Any
    ) -> None:
        """Remember the node's metadata; its input messages count as seen."""
        metadata = config.get("metadata") or {}
        if TAG_HIDDEN in tags or (ns := self._wanted(metadata)) is None:
            return
        meta = dict(metadata)
        meta.setdefault("ls_integration", "langgraph")  # as LangGraph's runs' metadata
        self.runs[key] = (ns, meta)
        for msg in _messages_in(inputs):
            if (mid := _message_id(msg)) is not None:
                self.seen.add(mid)

    def node_end(self, key: Any, output: Any) -> None:
        """Yield the messages of the node's output not seen before (Commands too)."""
        meta = self.runs.pop(key, None)
        if meta is None:
            return
        outputs = (
            output
            if isinstance(output, list) and any(isinstance(o, Command) for o in output)
            else [output]
        )
        for out in outputs:
            value = out.update if isinstance(out, Command) else out
            for msg in _messages_in(value):
                self._emit(meta, msg, dedupe=True)

    def node_error(self, key: Any) -> None:
        self.runs.pop(key, None)

    # -- LangChain callbacks (used only when this is a LangChain handler) ---

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: Any,
        tags: Any = None,
        metadata: Any = None,
        **kw: Any,
    ) -> None:
        if not metadata or (tags and TAG_NOSTREAM in tags):
            return
        if (ns := self._wanted(metadata)) is None:
            return
        if user_tags := [t for t in tags or () if not t.startswith("seq:step")]:
            metadata["tags"] = user_tags
        self.runs[run_id] = (ns, metadata)

    def on_llm_new_token(self, token: str, *, chunk: Any = None, run_id: Any, **kw: Any) -> None:
        if chunk is not None and hasattr(chunk, "message") and (meta := self.runs.get(run_id)):
            self._emit(meta, chunk.message, dedupe=False)

    def on_llm_end(self, response: Any, *, run_id: Any, **kw: Any) -> None:
        meta = self.runs.pop(run_id, None)
        if meta and response.generations and response.generations[0]:
            message = getattr(response.generations[0][0], "message", None)
            if message is not None:
                self._emit(meta, message, dedupe=True)

    def on_llm_error(self, error: BaseException, *, run_id: Any, **kw: Any) -> None:
        self.runs.pop(run_id, None)

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        return output

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        return output


_HANDLER_CLS: list[type] = []


def _handler_class() -> type:
    """MessagesStream as a LangChain streaming handler, or as is without LangChain.

    The streaming base makes ``model.invoke`` stream its tokens to us."""
    if not _HANDLER_CLS:
        try:
            from langchain_core.callbacks import BaseCallbackHandler
        except ImportError:
            _HANDLER_CLS.append(MessagesStream)
        else:
            try:
                from langchain_core.tracers._streaming import _StreamingCallbackHandler
            except ImportError:  # pragma: no cover - older langchain_core
                _StreamingCallbackHandler = object  # type: ignore[assignment,misc]
            bases = (MessagesStream, BaseCallbackHandler, _StreamingCallbackHandler)
            bases = tuple(b for b in bases if b is not object)
            _HANDLER_CLS.append(type("LangChainMessagesStream", bases, {"run_inline": True}))
    return _HANDLER_CLS[0]


def make_stream(put: Put, subgraphs: bool, ns: tuple[str, ...]) -> MessagesStream:
    """A stream for a run in namespace ``ns`` (a nested run streaming "messages"
    itself passes its own namespace, whose events it wants with subgraphs off)."""
    return _handler_class()(put, subgraphs, ns or None)


def with_stream(callbacks: Any, stream: MessagesStream) -> Any:
    """The run's callbacks plus ``stream`` (a list, or a copied LangChain manager)."""
    if callbacks is None:
        return [stream]
    if isinstance(callbacks, list):
        return [*callbacks, stream]
    manager = callbacks.copy()
    manager.add_handler(stream, inherit=True)
    return manager


def find_stream(callbacks: Any) -> list[MessagesStream]:
    """The message streams among a task's callbacks (usually none)."""
    if not callbacks:
        return []
    handlers = callbacks if isinstance(callbacks, list) else getattr(callbacks, "handlers", ())
    return [h for h in handlers if isinstance(h, MessagesStream)]


def child_config_var() -> Any:
    """LangChain's context variable for the config of a runnable's children,
    when LangChain is loaded (a node calling ``model.invoke(msgs)`` without its
    config finds the node's config there); None otherwise."""
    module = sys.modules.get("langchain_core.runnables.config")
    return getattr(module, "var_child_runnable_config", None) if module else None


def _inheriting(config: dict[str, Any]) -> dict[str, Any]:
    """The node's config with its tags and metadata also held by its callback manager,
    as LangGraph's child config: a model bound with its own tags
    (``model.with_config(tags=[...])``) called without config replaces the config's
    tags, but keeps the manager's (the caller's tags stay on its runs)."""
    module = sys.modules.get("langchain_core.callbacks.manager")
    callbacks = config.get("callbacks")
    if module is None or not callbacks:
        return config
    if isinstance(callbacks, list):
        handlers = list(callbacks)
        manager = module.CallbackManager(handlers=handlers, inheritable_handlers=handlers)
    else:  # a caller's manager: its children get only what it lets them inherit
        handlers = list(callbacks.inheritable_handlers)
        manager = module.CallbackManager(handlers=handlers, inheritable_handlers=handlers)
        manager.add_tags(callbacks.inheritable_tags)
        manager.add_metadata(callbacks.inheritable_metadata)
    manager.add_tags(config.get("tags") or [])
    manager.add_metadata(config.get("metadata") or {})
    return {**config, "callbacks": manager}


def _enter(scope: Any) -> tuple[list[MessagesStream], Any, Any, object]:
    """Publish the task's config to LangChain and tell the streams a node starts."""
    callbacks = scope.run.config.get("callbacks")
    streams = find_stream(callbacks)
    config = scope.config()
    var = child_config_var()
    token = (var, var.set(_inheriting(config))) if var is not None else None
    key = object()
    for s in streams:
        s.node_start(key, config, config.get("tags") or (), scope.task.input)
    return streams, token, config, key


def _leave(
    streams: list[MessagesStream], token: Any, key: object, value: Any, failed: bool
) -> None:
    if token is not None:
        token[0].reset(token[1])
    for s in streams:
        if failed:
            s.node_error(key)
        else:
            s.node_end(key, value)


def observed(scope: Any, call: Callable[[], Any]) -> Any:
    """Run a task's node with callbacks in its config: LangChain sees the node's
    config as the current one, and message streams see its input and output."""
    if not scope.run.config.get("callbacks"):
        return call()
    streams, token, _, key = _enter(scope)
    try:
        value = call()
    except BaseException:
        _leave(streams, token, key, None, True)
        raise
    _leave(streams, token, key, value, False)
    return value


async def aobserved(scope: Any, call: Callable[[], Any]) -> Any:
    """Async twin of :func:`observed` (``call`` returns an awaitable)."""
    if not scope.run.config.get("callbacks"):
        return await call()
    streams, token, _, key = _enter(scope)
    try:
        value = await call()
    except BaseException:
        _leave(streams, token, key, None, True)
        raise
    _leave(streams, token, key, value, False)
    return value

"""``version="v2"``: LangGraph's typed output shapes, on top of the v1 stream.

v2 changes what a run hands back, never what runs or what is stored, so it is
a mapping over the ordinary stream rather than a second run loop:

- ``stream``/``astream`` yield ``{"type": mode, "ns": namespace, "data": payload}``
  for every mode, whatever ``stream_mode``/``subgraphs`` were (v1 changes the
  chunk's shape with both). A ``values`` part moves the ``__interrupt__`` key
  out of the state into ``"interrupts"``, and a Pydantic or dataclass state
  (or output schema) arrives as that class; ``checkpoints``/``debug`` payloads
  carry their state values the same way (except the input checkpoint's, which
  may lack required fields).
- ``invoke``/``ainvoke`` return :class:`~threadloom.types.GraphOutput` (value,
  interrupts) for ``stream_mode="values"``, else the list of parts.

An unknown ``version`` is a ``ValueError`` (LangGraph treats it as v1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import is_dataclass
from functools import partial
from typing import Any

from threadloom.constants import INTERRUPT, START
from threadloom.types import GraphOutput

__all__ = ["ainvoke", "astream", "invoke", "is_v2", "stream"]

_ROOT = "__root__"
Mapper = Callable[[dict[str, Any]], Any]


def is_v2(version: Any) -> bool:
    """True for "v2", False for "v1" (the default); anything else is refused."""
    if version is None or version == "v1":
        return False
    if version == "v2":
        return True
    raise ValueError(f"version must be 'v1' or 'v2', got {version!r}")


def stream(graph: Any, input: Any, config: Any, stream_mode: Any, kwargs: dict) -> Iterator[dict]:
    """The v2 parts of one run (``graph.stream`` with its v1 keywords)."""
    modes, subgraphs, maps = _plan(graph, stream_mode, kwargs)
    chunks = graph.stream(input, config, stream_mode=modes, **kwargs)
    return _parts(chunks, subgraphs, *maps)


async def astream(
    graph: Any, input: Any, config: Any, stream_mode: Any, kwargs: dict
) -> AsyncIterator[dict]:
    """Async twin of :func:`stream`."""
    modes, subgraphs, (out_map, state_map) = _plan(graph, stream_mode, kwargs)
    async for chunk in graph.astream(input, config, stream_mode=modes, **kwargs):
        yield _part(chunk, subgraphs, out_map, state_map)


def invoke(graph: Any, input: Any, config: Any, stream_mode: Any, kwargs: dict) -> Any:
    """``GraphOutput`` for "values", else the list of parts."""
    parts = stream(graph, input, config, stream_mode, kwargs)
    if stream_mode != "values":
        return list(parts)
    return _output(parts)


async def ainvoke(graph: Any, input: Any, config: Any, stream_mode: Any, kwargs: dict) -> Any:
    """Async twin of :func:`invoke`."""
    parts = [p async for p in astream(graph, input, config, stream_mode, kwargs)]
    return parts if stream_mode != "values" else _output(parts)


def _output(parts: Iterable[dict]) -> GraphOutput:
    latest: Any = None
    interrupts: list[Any] = []
    for part in parts:
        latest = part["data"]
        interrupts.extend(part.get("interrupts", ()))
    return GraphOutput(value=latest, interrupts=tuple(interrupts))


def _plan(
    graph: Any, stream_mode: Any, kwargs: dict
) -> tuple[list[str], bool, tuple[Mapper | None, Mapper | None]]:
    """The v1 stream modes as a list (so every chunk names its mode), whether
    chunks name their namespace, and the output/state mappers."""
    mode = stream_mode if stream_mode is not None else graph.stream_mode
    modes = [mode] if isinstance(mode, str) else list(mode)
    return modes, bool(kwargs.get("subgraphs")), _mappers(graph)


def _parts(
    chunks: Iterable[Any], subgraphs: bool, out_map: Mapper | None, state_map: Mapper | None
) -> Iterator[dict]:
    for chunk in chunks:
        yield _part(chunk, subgraphs, out_map, state_map)


def _part(chunk: Any, subgraphs: bool, out_map: Mapper | None, state_map: Mapper | None) -> dict:
    ns, mode, payload = chunk if subgraphs else ((), *chunk)
    if mode == "values":
        interrupts: Any = ()
        if isinstance(payload, dict):
            if INTERRUPT in payload:
                payload = dict(payload)  # the chunk may be shared with print_mode
                interrupts = payload.pop(INTERRUPT)
            if out_map is not None:
                payload = out_map(payload)
        return {"type": mode, "ns": ns, "data": payload, "interrupts": interrupts}
    if mode in ("checkpoints", "debug") and state_map is not None:
        payload = _with_state(payload, state_map)
    return {"type": mode, "ns": ns, "data": payload}


def _with_state(payload: Any, mapper: Mapper) -> Any:
    """A checkpoints (or debug "checkpoint") payload with its values as the
    state class; the input checkpoint (next holds START) is left as a dict."""
    if not isinstance(payload, dict):
        return payload
    inner = payload.get("payload") if payload.get("type") == "checkpoint" else payload
    if not isinstance(inner, dict) or not isinstance(inner.get("values"), dict):
        return payload
    if START in (inner.get("next") or ()):
        return payload
    coerced = {**inner, "values": mapper(inner["values"])}
    return {**payload, "payload": coerced} if inner is not payload else coerced


def _mappers(graph: Any) -> tuple[Mapper | None, Mapper | None]:
    """(output mapper, state mapper): a StateGraph whose output/state schema is a
    Pydantic model or dataclass gets its dicts turned into that class."""
    builder = getattr(graph, "builder", None)
    if builder is None:
        return None, None
    return (
        _mapper(getattr(graph, "output_channels", None), getattr(builder, "output_schema", None)),
        _mapper(getattr(graph, "stream_channels", None), getattr(builder, "state_schema", None)),
    )


def _mapper(keys: Any, schema: Any) -> Mapper | None:
    if keys is None or keys == _ROOT or (not isinstance(keys, str) and list(keys) == [_ROOT]):
        return None
    if not isinstance(schema, type):
        return None
    if is_dataclass(schema) or _is_pydantic(schema):
        return partial(_coerce, schema)
    return None


def _is_pydantic(schema: type) -> bool:
    try:
        from pydantic import BaseModel
    except ImportError:  # no pydantic, no pydantic states
        return False
    return issubclass(schema, BaseModel)


def _coerce(schema: type, values: dict[str, Any]) -> Any:
    return schema(**values)

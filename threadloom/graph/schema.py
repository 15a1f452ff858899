"""State schemas: which keys a graph has and how each key merges updates.

A schema is a TypedDict, a dataclass, a pydantic v2 model or any class with
annotations. Each annotated field becomes one channel named after the field:

- ``Annotated[T, reducer]`` (``reducer(old, new) -> merged``) ->
  ``BinaryOperatorAggregate`` so parallel writes are folded, not rejected;
- ``Annotated[T, SomeChannel(...)]`` or ``Annotated[T, SomeChannelClass]`` -> that channel;
- ``RemainingSteps``/``IsLastStep`` (:mod:`threadloom.managed`) -> no channel: the value is
  computed for each step and never stored;
- anything else -> ``LastValue`` (one write per step).

A schema without annotations (``StateGraph(list)``) is a single ``__root__`` channel.

Parsing (:func:`parse_schema`) is pure and does not import the runtime; only
:func:`channels_for` builds channel objects. The channel names are exactly
LangGraph's, so checkpoints of the same graph are comparable.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args, get_origin, get_type_hints

import typing_extensions

__all__ = [
    "ROOT",
    "FieldSpec",
    "channels_agree",
    "channels_for",
    "coerce_state",
    "fields_of",
    "is_pydantic_model",
    "needs_coercion",
    "parse_schema",
    "schema_types",
    "strip_annotated",
]

ROOT = "__root__"
"""Channel name used when the whole state is one value (schema without fields)."""

_WRAPPERS: set[Any] = {typing.ClassVar}
for _module in (typing, typing_extensions):
    for _name in ("Required", "NotRequired", "ReadOnly"):
        if hasattr(_module, _name):
            _WRAPPERS.add(getattr(_module, _name))


@dataclass(frozen=True)
class FieldSpec:
    """One state key as declared: its type, and how updates to it are merged."""

    name: str
    annotation: Any
    """The declared annotation, ``Annotated[...]`` and all."""
    type: Any
    """The value type with ``Annotated``/``Required``/``NotRequired`` removed."""
    reducer: Callable[[Any, Any], Any] | None = None
    channel: Any = None
    """An explicit channel instance or class from ``Annotated`` metadata."""
    managed: Any = None
    """A :class:`~threadloom.managed.ManagedValue` class: the key has no channel."""


def is_pydantic_model(cls: Any) -> bool:
    """True for a pydantic v2 ``BaseModel`` subclass (without importing pydantic)."""
    return inspect.isclass(cls) and hasattr(cls, "model_fields") and hasattr(cls, "model_validate")


def _unwrap(annotation: Any) -> Any:
    """Drop ``Required``/``NotRequired``/``ReadOnly`` wrappers around an annotation."""
    while get_origin(annotation) in _WRAPPERS:
        annotation = get_args(annotation)[0]
    return annotation


def strip_annotated(annotation: Any) -> Any:
    """The bare type of an annotation: no ``Annotated`` metadata, no wrappers."""
    annotation = _unwrap(annotation)
    while hasattr(annotation, "__metadata__"):
        annotation = _unwrap(annotation.__origin__)
    return annotation


def _type_hints(cls: type) -> dict[str, Any]:
    """Resolved annotations; an unresolvable one is an error, never silently a string.

    A string annotation left unresolved would lose its reducer (``Annotated``
    metadata) and quietly turn a merging key into a last-value key.
    """
    try:
        return get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise ValueError(
            f"cannot resolve the annotations of {cls.__qualname__} ({type(exc).__name__}: {exc}); "
            "names used in state annotations must be importable from the class's module "
            "(with `from __future__ import annotations`, define the class at module level)"
        ) from exc


def fields_of(cls: Any) -> dict[str, Any]:
    """Field name -> annotation (with ``Annotated`` extras) of a state class, in order.

    Works for TypedDicts, dataclasses, pydantic v2 models and plain annotated
    classes; returns ``{}`` for types without annotations (``list``, ``int``).
    ``ClassVar`` fields and pydantic private attributes are not fields.
    """
    if not inspect.isclass(cls) or not _has_annotations(cls):
        return {}
    try:
        cached = _FIELDS_CACHE.get(cls)
    except TypeError:  # unhashable or not weak-referenceable: compute every time
        return _compute_fields(cls)
    if cached is None:
        cached = _compute_fields(cls)
        try:
            _FIELDS_CACHE[cls] = cached
        except TypeError:
            pass
    return dict(cached)


_FIELDS_CACHE: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def _compute_fields(cls: type) -> dict[str, Any]:
    hints = _type_hints(cls)
    if is_pydantic_model(cls):
        names = list(cls.model_fields)
    elif dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls)]
    else:
        names = [k for k, v in hints.items() if get_origin(v) is not typing.ClassVar]
    return {name: hints.get(name, Any) for name in names if name != "__slots__"}


def _has_annotations(cls: type) -> bool:
    return any(getattr(base, "__annotations__", None) for base in cls.__mro__ if base is not object)


def _is_channel(item: Any) -> bool:
    try:
        from threadloom.channels.base import BaseChannel
    except ImportError:  # runtime not importable: only reducers can be parsed
        return False
    return isinstance(item, BaseChannel) or (
        inspect.isclass(item) and issubclass(item, BaseChannel)
    )


def _reducer_arity_ok(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature (operator.add has one)
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2


def _field_spec(name: str, annotation: Any) -> FieldSpec:
    from threadloom.managed.base import is_managed_value

    bare = strip_annotated(annotation)
    inner = _unwrap(annotation)
    metadata = getattr(inner, "__metadata__", ())
    last = (get_origin(metadata[-1]) or metadata[-1]) if metadata else None
    if is_managed_value(last):
        return FieldSpec(name, annotation, bare, managed=last)
    for item in metadata:
        if _is_channel(item):
            return FieldSpec(name, annotation, bare, channel=item)
    if metadata and callable(metadata[-1]) and not inspect.isclass(metadata[-1]):
        reducer = metadata[-1]
        if not _reducer_arity_ok(reducer):
            raise ValueError(
                f"invalid reducer for state key {name!r}: expected a function (a, b) -> c, "
                f"got {reducer!r} with signature {inspect.signature(reducer)}"
            )
        return FieldSpec(name, annotation, bare, reducer=reducer)
    return FieldSpec(name, annotation, bare)


def parse_schema(schema: Any) -> dict[str, FieldSpec]:
    """Every state key a schema declares, with its reducer or explicit channel.

    Raises:
        ValueError: a reducer that does not take exactly two positional arguments.
    """
    fields = fields_of(schema)
    if not fields:
        return {ROOT: _field_spec(ROOT, schema)}
    return {name: _field_spec(name, ann) for name, ann in fields.items()}


def channels_for(specs: dict[str, FieldSpec]) -> dict[str, Any]:
    """One fresh channel object per state key (needs ``threadloom.channels``)."""
    from threadloom.channels import BinaryOperatorAggregate, LastValue

    out: dict[str, Any] = {}
    for name, spec in specs.items():
        if spec.channel is not None:
            channel = spec.channel(spec.type) if inspect.isclass(spec.channel) else spec.channel
            if callable(getattr(channel, "for_type", None)):  # DeltaChannel: typ from the key
                channel = channel.for_type(spec.type)
        elif spec.reducer is not None:
            channel = BinaryOperatorAggregate(spec.type, spec.reducer)
        else:
            channel = LastValue(spec.type)
        if hasattr(channel, "key"):
            try:
                channel.key = name
            except AttributeError:  # a channel with a read-only key
                pass
        out[name] = channel
    return out


def channels_agree(a: Any, b: Any) -> bool:
    """Two declarations of one key's channel agree: the same object, or equal
    instances (LangGraph compares with ``==``: ``Annotated[list, DeltaChannel(r)]``
    written in both the state and the input schema is one key)."""
    if a is b:
        return True
    if a is None or b is None or inspect.isclass(a) or inspect.isclass(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # a channel whose == raises: not known to agree
        return False


def same_channel(a: Any, b: Any) -> bool:
    """Whether two channels for the same key behave alike (same kind and reducer)."""
    if type(a) is not type(b):
        return False
    op_a, op_b = getattr(a, "operator", None), getattr(b, "operator", None)
    return op_a is op_b or op_a == op_b


def needs_coercion(schema: Any) -> bool:
    """Whether nodes reading this schema get an instance rather than a dict."""
    return inspect.isclass(schema) and (
        dataclasses.is_dataclass(schema) or is_pydantic_model(schema)
    )


def coerce_state(schema: Any, values: dict[str, Any]) -> Any:
    """Turn the dict of channel values into the schema class a node expects."""
    return schema(**values)


def schema_types(tp: Any) -> set[type]:
    """User classes reachable from a schema's annotations (for the serde allowlist).

    One walker for compile and users alike:
    :func:`~threadloom.checkpoint.serde.allowlist_from_annotations` (``Annotated``,
    unions, ``Literal[Enum.X]``, containers, TypedDicts, NamedTuples, dataclasses,
    pydantic models and the type arguments of generic ones). A schema that is a
    plain annotated class has its fields walked the same way.
    """
    from threadloom.checkpoint.serde.annotations import allowlist_from_annotations

    found = allowlist_from_annotations(tp)
    if not inspect.isclass(tp) or get_origin(tp) is not None or needs_coercion(tp):
        return found
    if typing_extensions.is_typeddict(tp) or tp.__module__ in ("builtins", "typing"):
        return found
    try:
        fields = fields_of(tp)
    except ValueError:  # unresolvable annotations: parse_schema reports them
        return found
    for annotation in fields.values():
        found |= allowlist_from_annotations(annotation)
    return found

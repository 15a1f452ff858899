"""The codec for pydantic v2 models: every field's value, and which were set.

A model's state is a dict of field name -> value holding:

- every field, set or not: a default is data too (a deploy that only changes a
  default must not change what past checkpoints read back as),
- the extra fields (``extra="allow"``),
- ``"__unset__"``: the stored keys that are *not* in ``model_fields_set`` (only
  present when there are any), so ``model_fields_set`` revives exactly.

The one exception is LangChain's own message and document classes
(``langchain_core.messages``, ``langchain_core.documents``; not subclasses defined
elsewhere): their defaults are fixed by LangChain, not by
the application, and a conversation stores thousands of them, so an unset field
provably holding its default (same type, same value: ``None``, ``"human"``,
``[]``, ``{}``...) is left out and revived from the class. A ``HumanMessage``
thus stores ``content`` and ``id`` only.

The decoder reads every layout written so far: ``model_fields_set`` is the stored
keys minus ``__unset__`` and missing fields take the class's current defaults
(rows written before every field was stored left defaults out; those read as the
current default). Reviving never runs validators and never looks fields up by
alias (state is keyed by field name).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["encode_model", "construct_model", "UNSET_KEY"]

UNSET_KEY = "__unset__"  # pydantic forbids field names starting with "_": no clash

# how an unset field's value is recognised as its default (and left out)
_KEEP, _EQUAL, _FLOAT, _EMPTY, _SAME = range(5)
# how a missing field is filled on revival (constants come from the plan's template)
_FILL_CONST, _FILL_EMPTY, _FILL_DEFAULT, _FILL_NONE = range(4)

_ATOMIC = (type(None), bool, int, str, bytes)
_CONTAINERS = (list, dict, set, frozenset, tuple)


@dataclass(frozen=True, slots=True)
class _Plan:
    """Per-class facts computed once: field order, default tests and fillers."""

    names: tuple[str, ...]
    name_set: frozenset[str]
    checks: tuple[tuple[str, int, Any], ...]  # (name, test kind, default)
    template: dict[str, Any]  # every field in class order; constants hold their default
    fills: tuple[tuple[str, int, Any], ...]  # (name, fill kind, default | type | field)
    dynamic: tuple[tuple[str, int, Any], ...]  # the fills that are not constants
    ordered_fill: bool  # a default factory reads earlier fields: fill strictly in order
    direct: bool  # not a root model: assemble the instance directly
    post_init: bool
    extra: bool  # extra="allow": unknown stored keys are extras
    compact: bool  # defaults fixed by a library (LangChain messages): unset defaults left out


_PLANS: dict[type, _Plan] = {}


def _classify(field: Any) -> tuple[int, int, Any]:
    """``(test kind, fill kind, default)`` for one pydantic ``FieldInfo``."""
    if field.is_required():
        return _KEEP, _FILL_NONE, None
    factory = field.default_factory
    if factory is not None:
        if factory in _CONTAINERS and not _takes_data(field):
            return _EMPTY, _FILL_EMPTY, factory
        return _KEEP, _FILL_DEFAULT, field
    default = field.default
    kind = type(default)
    if kind in _ATOMIC:  # pydantic hands these out uncopied: the default object itself
        return _EQUAL, _FILL_CONST, default
    if kind is float:
        return _FLOAT, _FILL_CONST, default
    if kind in _CONTAINERS and not default:
        return _EMPTY, _FILL_EMPTY, kind
    if isinstance(default, enum.Enum):
        return _SAME, _FILL_CONST, default  # members deep-copy to themselves
    return _KEEP, _FILL_DEFAULT, field


# LangChain's own classes stored by the thousand: messages and retrieved documents
_FIXED_DEFAULTS = ("langchain_core.messages", "langchain_core.documents")


def _fixed_defaults(cls: Any) -> bool:
    """LangChain's own message and ``Document`` classes: their defaults change with
    langchain-core, never with a deploy of the application, so leaving them out
    cannot rewrite history."""
    module = getattr(cls, "__module__", "") or ""
    return any(module == p or module.startswith(p + ".") for p in _FIXED_DEFAULTS)


def _takes_data(field: Any) -> bool:
    """A factory reading the fields before it (pydantic >= 2.10; older ones have none)."""
    return bool(getattr(field, "default_factory_takes_validated_data", False))


def plan_for(cls: Any) -> _Plan:
    """The cached :class:`_Plan` of a pydantic model class (parametrized generics included)."""
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    checks, fills, template = [], [], {}
    ordered_fill = False
    for name, field in cls.__pydantic_fields__.items():
        test, fill, default = _classify(field)
        checks.append((name, test, default))
        fills.append((name, fill, default))
        template[name] = default if fill == _FILL_CONST else None
        ordered_fill = ordered_fill or _takes_data(field)
    plan = _PLANS[cls] = _Plan(
        names=tuple(template),
        name_set=frozenset(template),
        checks=tuple(checks),
        template=template,
        fills=tuple(fills),
        dynamic=tuple(f for f in fills if f[1] != _FILL_CONST),
        ordered_fill=ordered_fill,
        direct=not cls.__pydantic_root_model__,
        post_init=bool(cls.__pydantic_post_init__),
        extra=cls.model_config.get("extra") == "allow",
        compact=_fixed_defaults(cls) and not cls.__pydantic_root_model__,
    )
    return plan


def encode_model(obj: Any) -> dict[str, Any]:
    """The stored state of a pydantic model (see the module docstring for the layout)."""
    cls = type(obj)
    plan = _PLANS.get(cls) or plan_for(cls)
    state = obj.__dict__  # pydantic keeps exactly the field values here...
    if len(state) != len(plan.names):  # ...unless e.g. a cached_property wrote to it
        state = {name: getattr(obj, name) for name in plan.names}
    fields_set = obj.__pydantic_fields_set__
    extra = obj.__pydantic_extra__
    if not extra and fields_set.issuperset(plan.names):
        return state  # everything was set: the common case for models built by hand
    if plan.compact:
        out, unset = _compact(plan, state, fields_set)
    else:  # every field, so a changed default never rewrites what was stored
        out = dict(state)
        unset = [name for name in plan.names if name not in fields_set]
    if extra:
        if UNSET_KEY in extra:  # would be read back as the marker: refuse, never corrupt
            raise ValueError(f"extra field {UNSET_KEY!r} is reserved by the serializer")
        out.update(extra)
        unset.extend(key for key in extra if key not in fields_set)
    if unset:
        out[UNSET_KEY] = unset
    return out


def _compact(
    plan: _Plan, state: dict[str, Any], fields_set: set[str]
) -> tuple[dict[str, Any], list[str]]:
    """``(stored fields, unset names among them)`` leaving out unset fields that
    provably hold their default (only for classes with library-fixed defaults)."""
    out: dict[str, Any] = {}
    unset: list[str] = []
    for name, kind, default in plan.checks:
        value = state[name]
        if name in fields_set:
            out[name] = value
            continue
        # leave out only what reviving the class default gives back: same type, equal value
        if kind == _EQUAL:
            if value is default or (type(value) is type(default) and value == default):
                continue
        elif kind == _EMPTY:
            if type(value) is default and not value:
                continue
        elif kind == _SAME:
            if value is default:
                continue
        elif kind == _FLOAT:  # 0.0 == -0.0 but they differ; nan never equals itself (kept)
            if type(value) is float and value == default and _sign(value) == _sign(default):
                continue
        out[name] = value
        unset.append(name)
    return out, unset


def _sign(x: float) -> float:
    return math.copysign(1.0, x)


def construct_model(cls: Any, state: dict[str, Any]) -> Any:
    """Rebuild a pydantic model from its stored state without running validators.

    Missing fields take their defaults the way ``model_construct`` computes them
    (factories are called, mutable defaults copied) and stay out of
    ``model_fields_set``; a required field that is missing stays missing, as with
    ``model_construct``. Stored keys that are not fields become extras when the
    class allows extras and are dropped otherwise.
    """
    unset = state.get(UNSET_KEY)
    if unset is not None:
        state = {k: v for k, v in state.items() if k != UNSET_KEY}
    plan = _PLANS.get(cls) or plan_for(cls)
    if not plan.direct:  # root models: pydantic's own constructor
        fields_set = {name for name in state if name in plan.name_set}.difference(unset or ())
        return cls.model_construct(_fields_set=fields_set, **state)
    extra = None
    if len(state) == len(plan.names) and state.keys() >= plan.name_set:
        fields = dict(state)  # every field stored (stored order is the class's field order)
    else:
        fields, extra = _fill(plan, state)
    fields_set = set(state)
    if extra and not plan.extra:
        fields_set.difference_update(extra)
        extra = None
    if unset:
        fields_set.difference_update(unset)
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", fields)
    object.__setattr__(obj, "__pydantic_fields_set__", fields_set)
    object.__setattr__(obj, "__pydantic_extra__", (extra or {}) if plan.extra else None)
    object.__setattr__(obj, "__pydantic_private__", None)
    if plan.post_init:
        obj.model_post_init(None)  # private attributes get their defaults, as in model_construct
    return obj


def _fill(plan: _Plan, state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(fields, extras)``: field values in class order, missing ones as ``model_construct``
    would default them, and the stored keys that are not fields (None when there are none)."""
    if plan.ordered_fill:
        fields = _fill_ordered(plan, state)
    else:
        fields = plan.template.copy()
        fields.update(state)  # keeps the template's (class) order for the fields
        missing = 0
        for name, fill, arg in plan.dynamic:
            if name not in state:
                if fill == _FILL_EMPTY:
                    fields[name] = arg()
                elif fill == _FILL_DEFAULT:
                    fields[name] = arg.get_default(call_default_factory=True)
                else:
                    del fields[name]  # required and missing: stays missing
                    missing += 1
        if len(fields) + missing == len(plan.names):
            return fields, None  # no stored key beyond the fields
    extra_keys = state.keys() - plan.name_set
    if not extra_keys:
        return fields, None
    for key in extra_keys:
        fields.pop(key, None)
    return fields, {k: v for k, v in state.items() if k in extra_keys}


def _fill_ordered(plan: _Plan, state: dict[str, Any]) -> dict[str, Any]:
    """Slow path for factories that read the fields before them (``validated_data``)."""
    fields: dict[str, Any] = {}
    for name, fill, arg in plan.fills:
        if name in state:
            fields[name] = state[name]
        elif fill == _FILL_CONST:
            fields[name] = arg
        elif fill == _FILL_EMPTY:
            fields[name] = arg()
        elif fill == _FILL_DEFAULT:
            fields[name] = arg.get_default(call_default_factory=True, validated_data=fields)
    return fields

"""Checks of a run's keyword arguments, before anything runs.

LangGraph accepts a mistyped ``stream_mode`` (``"update"``) and streams
nothing, and ignores an ``interrupt_before`` naming no node: a typo turns into
a run that silently does something else. Both are refused here, as a bad
``durability`` already was (docs/compatibility.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from typing import Any, get_args

from threadloom.errors import ConfigError
from threadloom.types import StreamMode

__all__ = ["check_run_kwargs"]

STREAM_MODES = frozenset(get_args(StreamMode))


def check_run_kwargs(kwargs: dict[str, Any], nodes: Collection[str]) -> None:
    """Validate (and normalize) ``stream``'s keyword arguments in place.

    Raises:
        ValueError: both ``checkpoint_during`` and ``durability``, or an unknown
            durability.
        ConfigError: an unknown stream or print mode, an ``interrupt_before`` /
            ``interrupt_after`` naming a node the graph does not have, or a
            ``control`` that is not a :class:`~threadloom.runtime.RunControl`.
    """
    _durability(kwargs)
    _control(kwargs.get("control"))
    for key in ("stream_mode", "print_mode"):
        _modes(key, kwargs.get(key))
    for key in ("interrupt_before", "interrupt_after"):
        names = kwargs.get(key)
        if names and names != "*":
            unknown = [n for n in ([names] if isinstance(names, str) else names) if n not in nodes]
            if unknown == ["*"]:
                raise ConfigError(f"{key}=['*'] names no node; for every node pass {key}='*'")
            if unknown:
                raise ConfigError(
                    f"{key} names {unknown[0]!r}, which is not a node of this graph "
                    f"(nodes: {sorted(n for n in nodes if not n.startswith('__'))})"
                )


def _durability(kwargs: dict[str, Any]) -> None:
    """Map the deprecated ``checkpoint_during`` to ``durability`` and check the mode."""
    during = kwargs.pop("checkpoint_during", None)
    if during is not None:
        warnings.warn(
            "`checkpoint_during` is deprecated; use `durability`", DeprecationWarning, stacklevel=4
        )
        if kwargs.get("durability") is not None:
            raise ValueError("Cannot use both `checkpoint_during` and `durability`")
        kwargs["durability"] = "async" if during else "exit"
    durability = kwargs.get("durability")
    if durability is not None and durability not in ("sync", "async", "exit"):
        raise ValueError(f"durability must be 'sync', 'async' or 'exit', got {durability!r}")


def _control(control: Any) -> None:
    """LangGraph fails inside the loop (``'str' object has no attribute
    'drain_requested'``) after saving the input; refused here, before anything runs."""
    from threadloom.graph.runtime import RunControl

    if control is not None and not isinstance(control, RunControl):
        raise ConfigError(
            f"control must be a threadloom.runtime.RunControl (or None), got {type(control).__name__}"
        )


def _modes(key: str, value: Any) -> None:
    if not value:
        return
    for mode in [value] if isinstance(value, str) else value:
        if mode not in STREAM_MODES:
            raise ConfigError(
                f"{key} {mode!r} is not a stream mode; use one or more of {sorted(STREAM_MODES)}"
            )

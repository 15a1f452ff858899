"""Managed values: state keys computed by the runtime for each step, never stored.

A managed key is declared in a state schema as ``Annotated[T, SomeManager]``
where ``SomeManager`` subclasses :class:`ManagedValue`. It has no channel: a
node reading it gets ``SomeManager.get(scratchpad)`` for the step it runs in,
a node writing it is ignored, and checkpoints, ``get_state`` and the graph's
output never contain it (as in LangGraph).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["ManagedValue", "ManagedValueSpec", "StepWindow", "is_managed_value"]

V = TypeVar("V")


class StepWindow(Protocol):
    """What a manager may read: the task's step and the run's stop step.

    ``stop`` is the first step the run may not execute (start step +
    ``recursion_limit`` + 1), so ``stop - step`` steps are left, this one included.
    """

    step: int
    stop: int


class ManagedValue(ABC, Generic[V]):
    """A value derived from the step a task runs in (LangGraph's ``ManagedValue``)."""

    @staticmethod
    @abstractmethod
    def get(scratchpad: StepWindow) -> V:
        """The value a task running at ``scratchpad.step`` reads."""


ManagedValueSpec = type[ManagedValue]


def is_managed_value(value: Any) -> bool:
    """Whether an ``Annotated`` extra names a managed value class.

    LangGraph's own managers (``langgraph.managed.RemainingSteps`` in a state
    class imported from a LangGraph package) count too, recognised by their base
    class without importing LangGraph: their ``get`` only reads ``step``/``stop``.
    """
    if not inspect.isclass(value):
        return False
    if issubclass(value, ManagedValue):
        return True
    return any(
        b.__name__ == "ManagedValue" and b.__module__ == "langgraph.managed.base"
        for b in value.__mro__[1:]
    )

"""Managed state keys: ``RemainingSteps`` and ``IsLastStep`` (as ``langgraph.managed``).

Declare them in a state schema to let a node or a router see how close the run
is to its ``recursion_limit``::

    class State(TypedDict):
        messages: Annotated[list, add_messages]
        remaining_steps: RemainingSteps

    def route(state):
        return END if state["remaining_steps"] < 2 else "tools"

The values are computed for each step from the run's ``recursion_limit``; they
are read-only (a node's write to them is dropped) and never stored.
"""

from __future__ import annotations

from typing import Annotated

from threadloom.managed.base import ManagedValue, StepWindow, is_managed_value

__all__ = [
    "IsLastStep",
    "IsLastStepManager",
    "ManagedValue",
    "RemainingSteps",
    "RemainingStepsManager",
    "is_managed_value",
]


class IsLastStepManager(ManagedValue[bool]):
    """True in the last step the recursion limit allows (the next one would raise)."""

    @staticmethod
    def get(scratchpad: StepWindow) -> bool:
        return scratchpad.step == scratchpad.stop - 1


class RemainingStepsManager(ManagedValue[int]):
    """Steps this run may still execute, the current one included."""

    @staticmethod
    def get(scratchpad: StepWindow) -> int:
        return scratchpad.stop - scratchpad.step


IsLastStep = Annotated[bool, IsLastStepManager]
RemainingSteps = Annotated[int, RemainingStepsManager]

"""Channels: the typed slots of graph state (LangGraph's ``langgraph.channels``)."""

from threadloom.channels.any_value import AnyValue
from threadloom.channels.base import MISSING, BaseChannel
from threadloom.channels.binop import BinaryOperatorAggregate
from threadloom.channels.delta import DeltaChannel
from threadloom.channels.ephemeral_value import EphemeralValue
from threadloom.channels.last_value import LastValue, LastValueAfterFinish
from threadloom.channels.named_barrier_value import (
    NamedBarrierValue,
    NamedBarrierValueAfterFinish,
)
from threadloom.channels.topic import Topic
from threadloom.channels.untracked_value import UntrackedValue

__all__ = [
    "MISSING",
    "AnyValue",
    "BaseChannel",
    "BinaryOperatorAggregate",
    "DeltaChannel",
    "EphemeralValue",
    "LastValue",
    "LastValueAfterFinish",
    "NamedBarrierValue",
    "NamedBarrierValueAfterFinish",
    "Topic",
    "UntrackedValue",
]

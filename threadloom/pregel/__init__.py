"""The Pregel runtime (LangGraph's ``langgraph.pregel``)."""

from threadloom.pregel.main import Pregel
from threadloom.pregel.node import NodeBuilder, PregelNode
from threadloom.pregel.write import ChannelWrite, ChannelWriteEntry, ChannelWriteTupleEntry

__all__ = [
    "ChannelWrite",
    "ChannelWriteEntry",
    "ChannelWriteTupleEntry",
    "NodeBuilder",
    "Pregel",
    "PregelNode",
]

"""Compatibility shim: LangGraph's private path ``langgraph.pregel._write``."""

from threadloom.pregel.write import (
    PASSTHROUGH,
    SKIP_WRITE,
    ChannelWrite,
    ChannelWriteEntry,
    ChannelWriteTupleEntry,
)

__all__ = [
    "PASSTHROUGH",
    "SKIP_WRITE",
    "ChannelWrite",
    "ChannelWriteEntry",
    "ChannelWriteTupleEntry",
]

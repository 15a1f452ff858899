"""Compatibility shim: LangGraph's private path ``langgraph.pregel._read``."""

from threadloom.pregel.node import NodeBuilder, PregelNode

__all__ = ["NodeBuilder", "PregelNode"]

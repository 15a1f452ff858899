"""Build graphs over a shared state: ``StateGraph``, ``START``, ``END``, ``add_messages``.

Mirrors ``langgraph.graph`` so imports port by renaming the package.
"""

from __future__ import annotations

from typing import Any

from threadloom.constants import END, START
from threadloom.graph.message import MessagesState, RemoveMessage, add_messages
from threadloom.graph.state import InvalidGraphError, StateGraph

__all__ = [
    "END",
    "START",
    "CompiledStateGraph",
    "InvalidGraphError",
    "MessageGraph",
    "MessagesState",
    "RemoveMessage",
    "StateGraph",
    "add_messages",
]


def __getattr__(name: str) -> Any:
    # compile.py imports the runtime; keep `import threadloom.graph` light
    if name == "CompiledStateGraph":
        from threadloom.graph.compile import CompiledStateGraph

        return CompiledStateGraph
    if name == "MessageGraph":
        from threadloom.graph.message_graph import MessageGraph

        return MessageGraph
    raise AttributeError(f"module 'threadloom.graph' has no attribute {name!r}")

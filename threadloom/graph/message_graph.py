"""``MessageGraph`` (deprecated in LangGraph 1.0): a graph whose whole state is
one message list merged with :func:`add_messages`.

Kept so programs written against it port unchanged; new code should use
``StateGraph`` with a ``messages`` key (``MessagesState``).
"""

from __future__ import annotations

import warnings
from typing import Annotated

from threadloom.graph.message import add_messages
from threadloom.graph.state import StateGraph

__all__ = ["MessageGraph"]


class MessageGraph(StateGraph):
    """Each node gets the message list and returns messages (one, several, or
    none) that ``add_messages`` merges into it."""

    def __init__(self) -> None:
        warnings.warn(
            "MessageGraph is deprecated (as in LangGraph 1.0); use StateGraph with a "
            "`messages` key, e.g. MessagesState",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(Annotated[list, add_messages])

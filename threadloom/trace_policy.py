"""``TracePolicy``: what a node's own trace run records (``add_node(trace_policy=)``).

threadloom has no tracer of its own, so the policy is kept on the node for
callers that read it (as LangGraph keeps it on the node spec); accepting it
lets a ported program keep its ``add_node`` calls unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TracePolicy", "omit_payload"]


@dataclass(frozen=True, slots=True)
class TracePolicy:
    """Transforms applied to a node's input and output before a tracer records
    them, to drop or summarise large payloads (not a redaction tool: child runs
    are not covered)."""

    process_inputs: Callable[[Any], Any] | None = None
    process_outputs: Callable[[Any], Any] | None = None


def omit_payload(_value: Any) -> dict[str, Any]:
    """A ``TracePolicy`` processor that records nothing of the value."""
    return {}

"""Stream plumbing: where events go and how ``stream()`` shapes them.

An event is ``(namespace, mode, payload)``. A :class:`StreamSink` accepts the
modes its consumer asked for; a subgraph run gets its own sink plus, when the
caller streams with ``subgraphs=True``, the parent's (so nested events surface
with a namespace tuple).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

__all__ = ["StreamSink", "Emitter", "shape_output", "normalize_modes"]

Event = tuple[tuple[str, ...], str, Any]


class StreamSink:
    """A consumer's queue of events, filtered to the modes it wants."""

    __slots__ = ("modes", "put", "results")

    def __init__(
        self, modes: Iterable[str], put: Callable[[Event], None], results: bool = True
    ) -> None:
        self.modes = frozenset(modes)
        self.put = put
        # False for invoke()'s own sink: it reads only interrupts from ``updates``,
        # so the per-task result updates need not be built for it
        self.results = results


def normalize_modes(stream_mode: str | Sequence[str]) -> list[str]:
    return [stream_mode] if isinstance(stream_mode, str) else list(dict.fromkeys(stream_mode))


class Emitter:
    """Emits one loop's events to its sinks (its own, and maybe its parent's)."""

    __slots__ = ("ns", "sinks", "modes", "debug", "results", "values", "tasks", "checkpoints")

    def __init__(self, ns: tuple[str, ...], sinks: Sequence[StreamSink]) -> None:
        self.ns = ns
        self.sinks = [s for s in sinks if s.modes]
        self.modes: frozenset[str] = frozenset().union(*(s.modes for s in self.sinks))
        self.debug = "debug" in self.modes
        self.results = any(s.results and "updates" in s.modes for s in self.sinks)
        """Whether a sink reads the ``updates`` of task results (not only interrupts)."""
        # ``wants(mode)`` of the modes a step asks about, read once (sinks are fixed)
        self.values = self.wants("values")
        self.tasks = self.wants("tasks")
        self.checkpoints = self.wants("checkpoints")

    def wants(self, mode: str) -> bool:
        return mode in self.modes or (self.debug and mode in ("checkpoints", "tasks"))

    def emit(self, mode: str, payloads: Iterable[Any], step: int = 0) -> None:
        """Send each payload to the sinks that want ``mode`` (and ``debug`` wrappers)."""
        if not self.wants(mode):
            return
        ns = self.ns
        for payload in payloads:
            for sink in self.sinks:
                if mode in sink.modes:
                    sink.put((ns, mode, payload))
                if "debug" in sink.modes and mode in ("checkpoints", "tasks"):
                    sink.put(
                        (
                            ns,
                            "debug",
                            {
                                "step": step - 1 if mode == "checkpoints" else step,
                                "timestamp": datetime.now(timezone.utc).isoformat(),
                                "type": "checkpoint"
                                if mode == "checkpoints"
                                else "task_result"
                                if "result" in payload
                                else "task",
                                "payload": payload,
                            },
                        )
                    )


def shape_output(
    event: Event, stream_mode: str | Sequence[str], subgraphs: bool
) -> tuple[bool, Any]:
    """What ``stream()`` yields for ``event``: (wanted, chunk), LangGraph's v1 format."""
    ns, mode, payload = event
    if isinstance(stream_mode, str):
        if mode != stream_mode:
            return False, None
        return True, (ns, payload) if subgraphs else payload
    if mode not in stream_mode:
        return False, None
    return True, (ns, mode, payload) if subgraphs else (mode, payload)

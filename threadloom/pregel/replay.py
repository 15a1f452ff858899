"""Which checkpoint a subgraph loads while its parent replays (time travel).

During a replay, the first run of each subgraph (by stable namespace, task ids
stripped) starts from its latest checkpoint *before* the replay point, so a
persistent subgraph (``checkpointer=True``) sees the state it had then; later
runs of the same subgraph load normally. One instance is shared by every nested
run of one root run.
"""

from __future__ import annotations

from typing import Any

from threadloom.constants import NS_END

__all__ = ["ReplayState"]


class ReplayState:
    """The replay point and the subgraph namespaces already loaded from before it."""

    __slots__ = ("checkpoint_id", "_visited")

    def __init__(self, checkpoint_id: str) -> None:
        self.checkpoint_id = checkpoint_id
        self._visited: set[str] = set()

    def _first_visit(self, ns: str) -> bool:
        stable = ns.rsplit(NS_END, 1)[0] if NS_END in ns else ns
        if stable in self._visited:
            return False
        self._visited.add(stable)
        return True

    def _before(self) -> dict[str, Any]:
        return {"configurable": {"checkpoint_id": self.checkpoint_id}}

    def get_checkpoint(self, ns: str, saver: Any, config: dict[str, Any]) -> Any:
        """The tuple a subgraph run at ``ns`` starts from."""
        if self._first_visit(ns):
            return next(iter(saver.list(config, before=self._before(), limit=1)), None)
        return saver.get_tuple(config)

    async def aget_checkpoint(self, ns: str, saver: Any, config: dict[str, Any]) -> Any:
        """Async twin of :meth:`get_checkpoint`."""
        if self._first_visit(ns):
            async for saved in saver.alist(config, before=self._before(), limit=1):
                return saved
            return None
        return await saver.aget_tuple(config)

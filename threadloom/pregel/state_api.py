"""``Pregel``'s state methods: thin delegations to ``history.py`` (time travel).

Kept apart so ``main.py`` stays about running; ``history.py`` builds on the pure
planning functions (``tasks.py``, ``writes.py``, ``checkpoint.py``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["StateMixin"]


class StateMixin:
    """get_state / get_state_history / update_state / bulk_update_state (+ async twins)."""

    def get_state(self, config: Any, *, subgraphs: bool = False) -> Any:
        """The thread's state at ``config`` (latest if no checkpoint_id). See history.py."""
        from threadloom.pregel import history

        return history.get_state(self, config, subgraphs=subgraphs)

    async def aget_state(self, config: Any, *, subgraphs: bool = False) -> Any:
        from threadloom.pregel import history

        return await history.aget_state(self, config, subgraphs=subgraphs)

    def get_state_history(
        self, config: Any, *, filter: Any = None, before: Any = None, limit: Any = None
    ) -> Any:
        """Snapshots newest first. See history.py."""
        from threadloom.pregel import history

        return history.get_state_history(self, config, filter=filter, before=before, limit=limit)

    def aget_state_history(
        self, config: Any, *, filter: Any = None, before: Any = None, limit: Any = None
    ) -> Any:
        from threadloom.pregel import history

        return history.aget_state_history(self, config, filter=filter, before=before, limit=limit)

    def update_state(
        self, config: Any, values: Any, as_node: str | None = None, task_id: str | None = None
    ) -> Any:
        """Write ``values`` as if ``as_node`` produced them; returns the new config. See history.py.

        Raises:
            ThreadBusyError: a run holds the thread's lease (see multitask.py).
        """
        from threadloom.pregel import history, multitask

        with multitask.state_lease(self, config) as graph:
            return history.update_state(graph, config, values, as_node=as_node, task_id=task_id)

    async def aupdate_state(
        self, config: Any, values: Any, as_node: str | None = None, task_id: str | None = None
    ) -> Any:
        from threadloom.pregel import history, multitask

        async with multitask.astate_lease(self, config) as graph:
            return await history.aupdate_state(
                graph, config, values, as_node=as_node, task_id=task_id
            )

    def bulk_update_state(self, config: Any, supersteps: Any) -> Any:
        from threadloom.pregel import history, multitask

        with multitask.state_lease(self, config) as graph:
            return history.bulk_update_state(graph, config, supersteps)

    async def abulk_update_state(self, config: Any, supersteps: Any) -> Any:
        from threadloom.pregel import history, multitask

        async with multitask.astate_lease(self, config) as graph:
            return await history.abulk_update_state(graph, config, supersteps)

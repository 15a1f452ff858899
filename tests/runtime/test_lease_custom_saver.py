"""A leased run on a saver subclass that customises put/put_writes calls them.

The lease wrapper normally runs the storage flows itself (fence and write in
one transaction); a user's override (auditing, logging) must not be bypassed.
"""

from __future__ import annotations

from typing import Any

from tests.runtime.test_put_step import chain
from threadloom.checkpoint.memory import InMemorySaver


class Audited(InMemorySaver):
    def __init__(self) -> None:
        super().__init__()
        self.puts: list[Any] = []
        self.writes: list[Any] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.puts.append(metadata.get("step"))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.writes.append([c for c, _ in writes])
        super().put_writes(config, writes, task_id, task_path)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)


def test_leased_run_calls_the_subclass_put_and_put_writes() -> None:
    saver = Audited()
    graph = chain(2, saver)
    cfg = {"configurable": {"thread_id": "t"}}
    assert graph.invoke({"log": ["in"]}, cfg) == {"log": ["in", "n0", "n1"]}
    assert saver.puts == [-1, 0, 1, 2]
    assert ["log"] in saver.writes  # the nodes' writes went through the override
    assert [h.metadata["step"] for h in graph.get_state_history(cfg)] == [2, 1, 0, -1]


async def test_leased_async_run_calls_the_subclass_aput() -> None:
    saver = Audited()
    graph = chain(2, saver)
    cfg = {"configurable": {"thread_id": "t"}}
    assert await graph.ainvoke({"log": ["in"]}, cfg) == {"log": ["in", "n0", "n1"]}
    assert saver.puts == [-1, 0, 1, 2]
    assert ["log"] in saver.writes

"""``InMemorySaver``: the storage core driven synchronously over dicts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from threadloom.checkpoint.memory.executor import MemoryExecutor
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.core import StorageSaver
from threadloom.checkpoint.storage.drive import Flow
from threadloom.checkpoint.storage.expiry import ThreadTTL

__all__ = ["InMemorySaver", "MemorySaver"]


class InMemorySaver(ThreadTTL, StorageSaver):
    """Keeps checkpoints in process memory; for tests, demos and short jobs.

    Thread-safe (one lock). The async methods run inline: a dict never blocks.
    Same options as every threadloom saver (``serde``, ``delta``,
    ``compact_every``, ``cache_bytes``), plus a per-thread TTL (``ttl``, ``clock``:
    :class:`~threadloom.checkpoint.storage.expiry.ThreadTTL`).
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.executor = MemoryExecutor()
        self.codec.cache_reads = False  # the store is a dict already: caching costs, saves nothing
        # the executor checks SaveWrites.expected and counts references itself
        self.codec.strict_writes = self.codec.writes_add_refs = True

    def _run(self, flow: Flow, write: bool = False) -> Any:
        return drive.run(flow, self.executor, write)

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        return drive.run(flow, self.executor, write)

    def _iter(self, flow: Flow) -> Iterator[Any]:
        return drive.iterate(flow, self.executor)

    async def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        for item in drive.iterate(flow, self.executor):
            yield item


MemorySaver = InMemorySaver

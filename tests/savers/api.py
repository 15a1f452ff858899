"""``Api``: one async-looking facade over a saver's sync OR async methods, so
every conformance test is written once and runs against both APIs."""

from __future__ import annotations

from typing import Any


class Api:
    def __init__(self, raw: Any, mode: str, backend: Any) -> None:
        self.raw = raw
        self.mode = mode
        self.backend = backend

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.raw, name)(*args, **kwargs)
        return await getattr(self.raw, "a" + name)(*args, **kwargs)

    async def put(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        return await self._call("put", config, checkpoint, metadata, versions)

    async def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await self._call("put_writes", config, writes, task_id, task_path)

    async def get_tuple(self, config: Any) -> Any:
        return await self._call("get_tuple", config)

    async def get(self, config: Any) -> Any:
        return await self._call("get", config)

    async def list(self, config: Any, **kwargs: Any) -> list[Any]:
        if self.mode == "sync":
            return list(self.raw.list(config, **kwargs))
        return [t async for t in self.raw.alist(config, **kwargs)]

    async def delete_thread(self, thread_id: str) -> None:
        await self._call("delete_thread", thread_id)

    async def delete_for_runs(self, run_ids: Any) -> None:
        await self._call("delete_for_runs", run_ids)

    async def copy_thread(self, source: str, target: str) -> None:
        await self._call("copy_thread", source, target)

    async def prune(self, thread_ids: Any, **kwargs: Any) -> Any:
        return await self._call("prune", thread_ids, **kwargs)

    async def stats(self, thread_id: str | None = None) -> dict[str, Any]:
        return await self._call("stats", thread_id)

    async def raw_counts(self) -> dict[str, int]:
        return await self.backend.raw_counts(self.raw)

"""Many inputs at once: ``batch``/``abatch`` (results in input order) and
``batch_as_completed``/``abatch_as_completed`` (``(index, result)`` as each run
ends), as LangChain's ``Runnable`` offers them on LangGraph's graphs.

A config is one for all inputs or a list with one per input; each run is a
plain ``invoke``/``ainvoke`` on its own (runs on one thread are refused or
queued by the thread's lease, docs/concurrency.md).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import as_completed
from typing import Any

__all__ = ["BatchMixin"]


def _configs(config: Any, n: int) -> list[Any]:
    if isinstance(config, (list, tuple)):
        if len(config) != n:
            raise ValueError(f"got {len(config)} configs for {n} inputs")
        return list(config)
    return [config] * n


class BatchMixin:
    """The batch methods of :class:`~threadloom.pregel.Pregel` (which provides
    ``invoke``/``ainvoke``)."""

    invoke: Any
    ainvoke: Any

    def _one(self, input: Any, config: Any, catch: bool, kwargs: dict[str, Any]) -> Any:
        try:
            return self.invoke(input, config, **kwargs)
        except Exception as exc:
            if catch:
                return exc
            raise

    def _submit_all(self, inputs: Sequence[Any], config: Any, catch: bool, kwargs: Any) -> list:
        from threadloom.pregel.pool import POOL

        configs = _configs(config, len(inputs))
        return [
            POOL.submit(contextvars.copy_context().run, self._one, inp, cfg, catch, kwargs)
            for inp, cfg in zip(inputs, configs)
        ]

    def batch(
        self,
        inputs: Sequence[Any],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """``invoke`` each input in parallel; the results in input order."""
        futures = self._submit_all(inputs, config, return_exceptions, kwargs)
        return [f.result() for f in futures]

    def batch_as_completed(
        self,
        inputs: Sequence[Any],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> Iterator[tuple[int, Any]]:
        """``(index, result)`` of each input's run, in the order the runs end."""
        futures = self._submit_all(inputs, config, return_exceptions, kwargs)
        index = {f: i for i, f in enumerate(futures)}
        for future in as_completed(futures):
            yield index[future], future.result()

    async def abatch(
        self,
        inputs: Sequence[Any],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Async twin of :meth:`batch`."""
        configs = _configs(config, len(inputs))
        return await asyncio.gather(
            *(self.ainvoke(i, c, **kwargs) for i, c in zip(inputs, configs)),
            return_exceptions=return_exceptions,
        )

    async def abatch_as_completed(
        self,
        inputs: Sequence[Any],
        config: Any = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[tuple[int, Any]]:
        """Async twin of :meth:`batch_as_completed`; the runs left are cancelled
        when the caller stops iterating."""

        async def one(i: int, inp: Any, cfg: Any) -> tuple[int, Any]:
            try:
                return i, await self.ainvoke(inp, cfg, **kwargs)
            except Exception as exc:
                if return_exceptions:
                    return i, exc
                raise

        configs = _configs(config, len(inputs))
        tasks = [
            asyncio.ensure_future(one(*args)) for args in zip(range(len(inputs)), inputs, configs)
        ]
        try:
            for next_done in asyncio.as_completed(tasks):
                yield await next_done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

"""Drivers: run a storage flow against an executor, sync or async.

A flow is a generator that yields :mod:`.ops` operations and receives their
results (or yields :class:`Emit` to hand a value to the caller, for lazy
``list``). Executors implement ``execute(op)`` (sync) or ``aexecute(op)``
(async) and ``transaction(write)`` / ``atransaction(write)`` context managers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any, NamedTuple

__all__ = ["Emit", "run", "arun", "iterate", "aiterate"]

Flow = Generator[Any, Any, Any]


class Emit(NamedTuple):
    """Yielded by a flow to produce a page of result items (not an operation)."""

    items: list[Any]


def run(flow: Flow, executor: Any, write: bool = False) -> Any:
    """Run ``flow`` to completion in one transaction; return its return value."""
    with executor.transaction(write):
        result = None
        while True:
            try:
                op = flow.send(result)
            except StopIteration as stop:
                return stop.value
            result = executor.execute(op)


async def arun(flow: Flow, executor: Any, write: bool = False) -> Any:
    """Async twin of :func:`run`."""
    async with executor.atransaction(write):
        result = None
        while True:
            try:
                op = flow.send(result)
            except StopIteration as stop:
                return stop.value
            result = await executor.aexecute(op)


def iterate(flow: Flow, executor: Any) -> Iterator[Any]:
    """Run a read flow lazily, yielding what it emits; one transaction per page.

    The flow's operations between two emits run in one read transaction, so
    a consumer that stops early never holds a transaction open.
    """
    result = None
    while True:
        with executor.transaction(False):
            while True:
                try:
                    op = flow.send(result)
                except StopIteration:
                    return
                if type(op) is Emit:
                    break
                result = executor.execute(op)
        result = None
        yield from op.items


async def aiterate(flow: Flow, executor: Any) -> AsyncIterator[Any]:
    """Async twin of :func:`iterate`."""
    result = None
    while True:
        async with executor.atransaction(False):
            while True:
                try:
                    op = flow.send(result)
                except StopIteration:
                    return
                if type(op) is Emit:
                    break
                result = await executor.aexecute(op)
        result = None
        for item in op.items:
            yield item

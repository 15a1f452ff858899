"""Leased runs on a saver whose class customises ``put``/``put_writes``.

``FencedSaver`` normally runs the storage flows itself, with the lease check in
the same transaction. A user subclass that overrides ``put``/``put_writes``
(logging, auditing, extra tables) would be bypassed that way, so for such a
saver its own methods are called, with the fence checked just before, in a
transaction of its own (the check and the write are then not atomic: a lease
lost in between is seen at the next write).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from threadloom.checkpoint.saver import BaseCheckpointSaver

__all__ = ["aput_each", "customised", "put_each", "no_ops"]


def no_ops() -> Generator[Any, Any, Any]:
    return None
    yield  # a flow with no operation (only the fence runs)


def customised(inner: Any, is_async: bool) -> bool:
    """Whether ``inner`` customises put/put_writes (see the module doc)."""
    from threadloom.pregel.persist import uses_put_step  # (runtime module: no cycle at import)

    return not uses_put_step(inner, is_async)


def put_each(saver: Any, steps: Any) -> Any:
    """Each step through ``BaseCheckpointSaver.put_step`` (``saver``'s own
    put_writes, then put); the last checkpoint's config."""
    outs = [BaseCheckpointSaver.put_step(saver, w, c) for w, c in steps]
    return next((o for o in reversed(outs) if o is not None), None)


async def aput_each(saver: Any, steps: Any) -> Any:
    """Async twin of :func:`put_each`."""
    outs = [await BaseCheckpointSaver.aput_step(saver, w, c) for w, c in steps]
    return next((o for o in reversed(outs) if o is not None), None)

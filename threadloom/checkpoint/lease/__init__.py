"""Thread leases: one writer per thread, fenced writes, multitask strategies.

``ops`` defines the lease operations every storage executor answers (handlers
per backend in ``memory``/``sqlite``/``postgres``/``redis``); ``lease`` holds
:class:`Lease`, ``fenced`` :class:`FencedSaver`; the runtime side is
:mod:`threadloom.pregel.multitask`. See docs/concurrency.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_TTL", "FencedSaver", "Lease", "LeaseInfo", "lease_backend"]


def __getattr__(name: str) -> Any:  # lazy: executors import the handler modules
    if name in ("DEFAULT_TTL", "FencedSaver", "Lease", "lease_backend"):
        from threadloom.checkpoint.lease import lease

        return getattr(lease, name)
    if name == "LeaseInfo":
        from threadloom.checkpoint.lease.ops import LeaseInfo

        return LeaseInfo
    raise AttributeError(f"module 'threadloom.checkpoint.lease' has no attribute {name!r}")

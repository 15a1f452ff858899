"""Arguments for the connections and pools a saver opens itself (never applied
to a connection or pool the caller passes in)."""

from __future__ import annotations

from typing import Any

__all__ = ["connect_kwargs", "pool_kwargs"]


def connect_kwargs(prepare_threshold: int | None) -> dict[str, Any]:
    """Settings for connections the saver opens itself (never for the caller's)."""
    return {"autocommit": True, "prepare_threshold": prepare_threshold}


def pool_kwargs(
    url: str, options: dict[str, Any] | bool, prepare_threshold: int | None, async_: bool
) -> dict[str, Any]:
    """ConnectionPool arguments: small by default, overridable.

    No ``check`` by default: the connector checks every connection it takes
    (:mod:`.checkout`, no round trip), which passes over dead connections without
    the pool's backoff sleep per failed check. ``pool={"check":
    ConnectionPool.check_connection}`` adds one round trip per checkout to also
    catch silently half-open connections. ``async_`` is kept for callers.
    """
    merged: dict[str, Any] = {
        "min_size": 1,
        "max_size": 10,
        "max_idle": 300.0,
        "timeout": 30.0,
    }
    if isinstance(options, dict):
        merged.update(options)
    kwargs = dict(merged.pop("kwargs", None) or {})
    kwargs = {**connect_kwargs(prepare_threshold), **kwargs}
    return {"conninfo": url, "kwargs": kwargs, "open": False, **merged}

"""Arguments for the connections and pools a saver opens itself (never applied
to a connection or pool the caller passes in)."""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.postgres.health import acheck_connection, check_connection

__all__ = ["connect_kwargs", "pool_kwargs"]


def connect_kwargs(prepare_threshold: int | None) -> dict[str, Any]:
    """Settings for connections the saver opens itself (never for the caller's)."""
    return {"autocommit": True, "prepare_threshold": prepare_threshold}


def pool_kwargs(
    url: str, options: dict[str, Any] | bool, prepare_threshold: int | None, async_: bool
) -> dict[str, Any]:
    """ConnectionPool arguments: checked connections, small by default, overridable.

    ``check`` validates a connection each time it leaves the pool, so a backend
    killed by an idle timeout or a failover is replaced instead of failing the
    next call. The default check costs no round trip (see :func:`is_dead`);
    ``pool={"check": ConnectionPool.check_connection}`` trades one round trip
    per checkout for also catching silently half-open connections.
    """
    merged: dict[str, Any] = {
        "min_size": 1,
        "max_size": 10,
        "max_idle": 300.0,
        "timeout": 30.0,
        "check": acheck_connection if async_ else check_connection,
    }
    if isinstance(options, dict):
        merged.update(options)
    kwargs = dict(merged.pop("kwargs", None) or {})
    kwargs = {**connect_kwargs(prepare_threshold), **kwargs}
    return {"conninfo": url, "kwargs": kwargs, "open": False, **merged}

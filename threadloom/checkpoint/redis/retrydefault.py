"""The retry policy of a client ``from_conn_string`` builds.

``Redis.from_url`` (sync and asyncio) builds connections that do not retry a
dropped connection (``CLIENT KILL``, a restart, ``timeout`` in redis.conf, a
proxy closing idle sockets): the next call failed, on an asyncio saver every
time. redis-py 6+ gives ``redis.Redis(...)`` a default ``retry``, but 5.x (which
``pyproject.toml`` allows) has none, and there a connection retries only errors
named in its ``retry_on_error`` (a ``retry=`` alone retries nothing). So the
policy is built here, the same on redis-py 5.x through 8.x: exponential backoff
with jitter, :data:`RETRIES` retries, on ``ConnectionError``/``TimeoutError``,
with the ``Retry`` class of the client's flavour (the asyncio client needs
``redis.asyncio.retry.Retry``: a sync one never awaits the call it retries).

A retried write script may run twice on the server (the reply, not the
command, was lost): :mod:`.once` makes the second run answer with the first's
reply.
"""

from __future__ import annotations

from typing import Any

import redis.backoff
from redis.asyncio.retry import Retry as AsyncRetry
from redis.exceptions import ConnectionError, TimeoutError
from redis.retry import Retry

__all__ = ["RETRIES", "retry_options", "with_default_retry"]

_RETRY_OPTIONS = ("retry", "retry_on_error", "retry_on_timeout")
RETRIES = 3
"""Attempts after the first: a killed connection needs one, a restart a few."""


def _backoff() -> Any:
    # ExponentialWithJitterBackoff is redis-py 6+; 5.x has EqualJitterBackoff
    # (half fixed, half random share of the same exponential step)
    kind = getattr(redis.backoff, "ExponentialWithJitterBackoff", None)
    kind = kind or redis.backoff.EqualJitterBackoff
    return kind(cap=1.0, base=0.01)


def retry_options(factory: Any) -> dict[str, Any]:
    """``retry`` and ``retry_on_error`` keywords for a new client of ``factory``
    (``redis.Redis`` or ``redis.asyncio.Redis``); a fresh ``Retry`` per call."""
    asynchronous = factory.__module__.startswith("redis.asyncio")
    kind = AsyncRetry if asynchronous else Retry
    return {
        "retry": kind(_backoff(), RETRIES),
        "retry_on_error": [ConnectionError, TimeoutError],
    }


def with_default_retry(factory: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` plus :func:`retry_options`, unless the caller chose a retry
    policy of their own (``retry=``, ``retry_on_error=`` or ``retry_on_timeout=``)."""
    if any(name in options for name in _RETRY_OPTIONS):
        return options
    return {**options, **retry_options(factory)}

"""Node policies: how a node is retried (``RetryPolicy``), cached
(``CachePolicy``) and time-limited (``TimeoutPolicy``).

Plain configuration, never stored in checkpoints; ``threadloom.types`` re-exports
them under LangGraph's names.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, NamedTuple

__all__ = ["CachePolicy", "RetryPolicy", "TimeoutPolicy", "default_retry_on"]


def _http_status(exc: Exception) -> tuple[bool, int | None]:
    """``(is an HTTP status error, its status)`` for httpx's ``HTTPStatusError``
    and requests' ``HTTPError`` (status None: no response), found by class name
    so neither library is imported to ask."""
    for cls in type(exc).__mro__:
        module = cls.__module__.partition(".")[0]
        if (module, cls.__name__) in (("httpx", "HTTPStatusError"), ("requests", "HTTPError")):
            status = getattr(getattr(exc, "response", None), "status_code", None)
            return True, status if isinstance(status, int) else None
    return False, None


def default_retry_on(exc: Exception) -> bool:
    """Retry what is likely transient; never programming errors.

    An HTTP status error (httpx, requests) is retried for a 5xx status only, or
    when it carries no response: a 404 or a 401 will not change by asking again.
    (LangGraph means the same; for requests it retries every status, because a
    failed ``Response`` is falsy in its check.)"""
    if isinstance(exc, ConnectionError):
        return True
    is_http, status = _http_status(exc)
    if is_http:
        return status is None or 500 <= status < 600
    if isinstance(
        exc,
        (
            ValueError,
            TypeError,
            ArithmeticError,
            ImportError,
            LookupError,
            NameError,
            SyntaxError,
            RuntimeError,
            ReferenceError,
            StopIteration,
            StopAsyncIteration,
            OSError,
        ),
    ) and not isinstance(exc, ConnectionError):
        return False
    return True


class RetryPolicy(NamedTuple):
    """How a node is retried after an exception.

    The n-th retry waits ``min(max_interval, initial_interval * backoff_factor**n)``
    seconds, plus up to 1 s of jitter.
    """

    initial_interval: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    max_attempts: int = 3
    jitter: bool = True
    retry_on: type[Exception] | Sequence[type[Exception]] | Callable[[Exception], bool] = (
        default_retry_on
    )

    def should_retry(self, exc: Exception) -> bool:
        """True when ``exc`` matches ``retry_on``."""
        on = self.retry_on
        if isinstance(on, Sequence):
            return isinstance(exc, tuple(on))
        if isinstance(on, type) and issubclass(on, BaseException):
            return isinstance(exc, on)
        if callable(on):
            return bool(on(exc))
        raise TypeError(
            f"retry_on must be an exception class, a sequence of them or a callable, got {on!r}"
        )

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        interval = min(
            self.max_interval, self.initial_interval * self.backoff_factor ** (attempt - 1)
        )
        return interval + (random.uniform(0, 1) if self.jitter else 0)


def _default_cache_key(*args: Any, **kwargs: Any) -> str:
    from threadloom.checkpoint.serde.keys import stable_key

    return stable_key((args, kwargs))


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """Cache a node's writes by a key derived from its input.

    ``key_func`` turns the node's input into a key (default: a stable hash of the
    input's serialized form); ``ttl`` is in seconds, ``None`` for no expiry.
    """

    key_func: Callable[..., str | bytes] = _default_cache_key
    ttl: int | None = None


def _seconds(value: float | timedelta | None, field: str) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds <= 0:
        raise ValueError(f"{field} must be greater than 0")
    return seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeoutPolicy:
    """Time limits of one attempt of an async node (``add_node(..., timeout=)``).

    ``run_timeout``: seconds an attempt may run at all. ``idle_timeout``: seconds
    it may go without progress; ``refresh_on="auto"`` counts writes, stream and
    custom-stream output, LangChain callback events and ``runtime.heartbeat()``
    as progress, ``"heartbeat"`` only the latter. Exceeding either raises
    :class:`~threadloom.errors.NodeTimeoutError`, which the node's retry policy
    may retry. Cancellation is cooperative (asyncio), hence async nodes only.
    """

    run_timeout: float | timedelta | None = None
    idle_timeout: float | timedelta | None = None
    refresh_on: Literal["auto", "heartbeat"] = "auto"

    @classmethod
    def coerce(cls, value: float | timedelta | TimeoutPolicy | None) -> TimeoutPolicy | None:
        """A policy with positive float seconds from a number, a timedelta or a
        policy; None when no limit is set (as LangGraph, whose errors these are).

        Raises:
            ValueError: a limit <= 0, or ``refresh_on`` not "auto"/"heartbeat".
        """
        if value is None:
            return None
        if not isinstance(value, TimeoutPolicy):
            value = cls(run_timeout=value)
        if value.refresh_on not in ("auto", "heartbeat"):
            raise ValueError("refresh_on must be 'auto' or 'heartbeat'")
        run = _seconds(value.run_timeout, "run_timeout")
        idle = _seconds(value.idle_timeout, "idle_timeout")
        if run is None and idle is None:
            return None
        if all(v is None or type(v) is float for v in (value.run_timeout, value.idle_timeout)):
            return value  # already coerced (frozen: safe to share)
        return cls(run_timeout=run, idle_timeout=idle, refresh_on=value.refresh_on)

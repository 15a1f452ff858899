"""The retry policy of a client ``from_conn_string`` builds.

``redis.Redis.from_url`` (sync and asyncio) builds its connections with no
retries at all, unlike ``redis.Redis(...)``, whose default ``retry`` retries a
ConnectionError/TimeoutError with exponential backoff. A connection dropped
by the server (``CLIENT KILL``, a restart, ``timeout`` in redis.conf, a proxy
closing idle sockets) then failed the next call of an asyncio saver. The
client the saver builds gets the policy the same class would get when the
user builds it: the class's own default ``retry``, copied (each client its own).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

__all__ = ["with_default_retry"]

_RETRY_OPTIONS = ("retry", "retry_on_error", "retry_on_timeout")


def with_default_retry(factory: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` plus the class default ``retry`` of ``factory``, unless the
    caller chose a retry policy of their own."""
    if any(name in options for name in _RETRY_OPTIONS):
        return options
    try:
        default = inspect.signature(factory.__init__).parameters["retry"].default
    except (KeyError, TypeError, ValueError):
        return options  # a client class without a retry keyword: leave it alone
    if default is inspect.Parameter.empty or default is None:
        return options
    return {**options, "retry": copy.deepcopy(default)}

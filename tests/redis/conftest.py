"""Redis test fixtures: a unique key prefix per test, every key removed afterwards.

Several test runs may share the server, so tests never FLUSHDB.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

redis = pytest.importorskip("redis")


def keys_under(client: redis.Redis, prefix: str) -> list[bytes]:
    """Every key written under ``prefix`` (both ``{prefix:thread}`` and ``{prefix}``)."""
    found: list[bytes] = []
    for pattern in (f"{{{prefix}:*", f"{{{prefix}}}*"):
        found.extend(client.scan_iter(match=pattern, count=1000))
    return found


def is_op_key(key: bytes) -> bool:
    """A write script's op key (checkpoint/redis/once.py): it expires by itself."""
    return b"}:op:" in key


def keys_left(client: redis.Redis, prefix: str) -> list[bytes]:
    """Every key under ``prefix`` but the op keys, each of which must carry an expiry."""
    keys = keys_under(client, prefix)
    ops = [k for k in keys if is_op_key(k)]
    assert all(client.pttl(k) > 0 for k in ops), "an op key without an expiry"
    return [k for k in keys if not is_op_key(k)]


@pytest.fixture
def scan_keys():
    """``scan_keys(client, prefix)``: every key under a prefix, but the op keys
    of recent writes (which expire within minutes, see :func:`keys_left`)."""
    return keys_left


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def key_prefix(redis_client: redis.Redis) -> Iterator[str]:
    """A prefix unique to one test; its keys are deleted afterwards."""
    prefix = f"tltest-{uuid.uuid4().hex[:12]}"
    yield prefix
    leftover = keys_under(redis_client, prefix)
    if leftover:
        redis_client.delete(*leftover)

"""A client ``from_conn_string`` builds survives a dropped connection (probeprod).

``redis.asyncio.Redis.from_url`` builds connections with no retries, so after a
``CLIENT KILL`` the asyncio saver's next call failed with StorageError. The
saver's client now gets an explicit policy (redis-py 5.x has no default one;
with ``PYTHONPATH`` naming a redis 5.0.8 copy these tests pass too).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from redis.backoff import NoBackoff

from tests.appending import appending
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver

pytestmark = pytest.mark.redis


def kill(admin: redis.Redis, name: str) -> int:
    ids = [c["id"] for c in admin.client_list() if c.get("name") == name]
    for client_id in ids:
        admin.client_kill_filter(_id=client_id)
    return len(ids)


def graph():
    return appending("a", end=False)


def test_async_saver_from_url_survives_client_kill(redis_url, redis_client, key_prefix) -> None:
    name = f"tl-akill-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with AsyncRedisSaver.from_conn_string(
            redis_url, key_prefix=key_prefix, client_name=name
        ) as saver:
            app = graph().compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "t"}}
            await app.ainvoke({"n": ["x"]}, config)
            assert kill(redis_client, name) >= 1
            assert (await app.aget_state(config)).values == {"n": ["x", "a"]}
            assert kill(redis_client, name) >= 1
            out = await app.ainvoke({"n": ["y"]}, {"configurable": {"thread_id": "t2"}})
            assert out == {"n": ["y", "a"]}

    asyncio.run(main())


def test_sync_saver_from_url_survives_client_kill(redis_url, redis_client, key_prefix) -> None:
    name = f"tl-kill-{uuid.uuid4().hex[:8]}"
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, client_name=name) as saver:
        app = graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        app.invoke({"n": ["x"]}, config)
        assert kill(redis_client, name) >= 1
        assert app.get_state(config).values == {"n": ["x", "a"]}
        assert kill(redis_client, name) >= 1
        assert app.invoke({"n": ["y"]}, {"configurable": {"thread_id": "t2"}}) == {"n": ["y", "a"]}


def _assert_retries(client, retry_class) -> None:
    kwargs = client.connection_pool.connection_kwargs
    retry = kwargs["retry"]
    assert type(retry) is retry_class  # the asyncio client needs the asyncio Retry
    assert retry._retries >= 1
    assert not isinstance(retry._backoff, NoBackoff)
    # redis-py 5.x retries only errors named here (a retry= alone retries nothing)
    assert {redis.ConnectionError, redis.TimeoutError} <= set(kwargs["retry_on_error"])


def test_built_clients_retry_on_every_redis_py_version(redis_url, key_prefix) -> None:
    """The policy is built, not taken from redis-py's defaults: 5.x has none."""
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.retry import Retry

    async def main() -> None:
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
            _assert_retries(saver.client, AsyncRetry)

    asyncio.run(main())
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        _assert_retries(saver.client, Retry)


def test_a_retry_policy_of_the_caller_is_kept(redis_url, key_prefix) -> None:
    from redis.retry import Retry

    mine = Retry(NoBackoff(), 0)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix, retry=mine) as saver:
        assert saver.client.connection_pool.connection_kwargs["retry"] is mine

"""The runtime's parity scenarios give the same observations on Redis as in memory."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from tests.postgres import saver_parity as runner
from tests.redis.conftest import keys_under
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver

pytestmark = pytest.mark.redis


SCENARIOS = runner.scenarios()


@pytest.mark.parametrize("scenario", [s for _, s in SCENARIOS], ids=[i for i, _ in SCENARIOS])
def test_scenario_matches_memory(scenario, redis_url: str, key_prefix: str, redis_client) -> None:
    used: list[str] = []
    prefixes = (f"{key_prefix}-{n}" for n in itertools.count())  # fresh store per run
    try:
        _run(scenario, redis_url, prefixes, used)
    finally:  # ':' may not join prefixes, so the fixture's cleanup misses these
        for prefix in used:
            leftover = keys_under(redis_client, prefix)
            if leftover:
                redis_client.delete(*leftover)


def _run(scenario, redis_url: str, prefixes, used: list[str]) -> None:
    def fresh() -> str:
        used.append(next(prefixes))
        return used[-1]

    @contextlib.contextmanager
    def open_sync():
        with RedisSaver.from_conn_string(redis_url, key_prefix=fresh(), ttl=600) as s:
            yield s

    @contextlib.asynccontextmanager
    async def open_async():
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=fresh()) as s:
            yield s

    runner.check(scenario, open_sync, open_async)

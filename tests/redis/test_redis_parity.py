"""The runtime's parity scenarios give the same observations on Redis as in memory."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from tests.postgres import saver_parity as runner
from threadloom.checkpoint.redis import AsyncRedisSaver, RedisSaver

pytestmark = pytest.mark.redis


SCENARIOS = runner.scenarios()


@pytest.mark.parametrize("scenario", [s for _, s in SCENARIOS], ids=[i for i, _ in SCENARIOS])
def test_scenario_matches_memory(scenario, redis_url: str, key_prefix: str) -> None:
    prefixes = (f"{key_prefix}:{n}" for n in itertools.count())  # fresh store per run

    @contextlib.contextmanager
    def open_sync():
        with RedisSaver.from_conn_string(redis_url, key_prefix=next(prefixes), ttl=600) as s:
            yield s

    @contextlib.asynccontextmanager
    async def open_async():
        async with AsyncRedisSaver.from_conn_string(redis_url, key_prefix=next(prefixes)) as s:
            yield s

    runner.check(scenario, open_sync, open_async)

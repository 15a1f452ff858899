"""The runtime's parity scenarios give the same observations on Postgres as in memory."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from tests.postgres import saver_parity as runner
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver

pytestmark = pytest.mark.postgres


SCENARIOS = runner.scenarios()


@pytest.mark.parametrize("scenario", [s for _, s in SCENARIOS], ids=[i for i, _ in SCENARIOS])
def test_scenario_matches_memory(scenario, pg_url: str, fresh_schema: str) -> None:
    schemas = (f"{fresh_schema}_{n}" for n in itertools.count())  # fresh store per run
    used: list[str] = []

    @contextlib.contextmanager
    def open_sync():
        used.append(next(schemas))
        with PostgresSaver.from_conn_string(pg_url, schema=used[-1]) as saver:
            saver.setup()
            yield saver

    @contextlib.asynccontextmanager
    async def open_async():
        used.append(next(schemas))
        async with AsyncPostgresSaver.from_conn_string(pg_url, schema=used[-1]) as saver:
            await saver.setup()
            yield saver

    try:
        runner.check(scenario, open_sync, open_async)
    finally:
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as conn:
            for schema in used:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

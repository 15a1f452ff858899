"""The runtime's parity scenarios give the same observations on Postgres as in memory."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import sys
from pathlib import Path

import pytest

from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver

pytestmark = pytest.mark.postgres


def _runner():
    name = "threadloom_saver_parity"
    if name not in sys.modules:
        path = Path(__file__).with_name("saver_parity.py")
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


runner = _runner()
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

"""Per-thread TTL (``ttl=``, ``set_thread_ttl``, ``sweep_expired``) on the memory,
SQLite and Postgres savers, sync and async, with an injected clock (no sleeping)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.savers.api import Api
from tests.savers.backends import (
    _asqlite_counts,
    _memory_counts,
    _pg_counts,
    _sqlite_counts,
)
from tests.savers.test_retention import cfg, grow, ids
from threadloom.checkpoint.base import PruneReport
from threadloom.checkpoint.lease.ops import acquire_flow, release_flow
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.errors import ConfigError


class Clock:
    """An injectable clock: ``clock.now`` seconds, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Backend:
    def __init__(self, raw_counts: Any) -> None:
        self.raw_counts = raw_counts


@asynccontextmanager
async def _open(kind: str, tmp: str, request: Any, **options: Any) -> AsyncIterator[Any]:
    if kind == "memory":
        yield InMemorySaver(**options), _memory_counts
    elif kind == "sqlite":
        with SqliteSaver.from_conn_string(os.path.join(tmp, "s.db"), **options) as saver:
            yield saver, _sqlite_counts
    elif kind == "sqlite-async":
        async with AsyncSqliteSaver.from_conn_string(os.path.join(tmp, "s.db"), **options) as s:
            yield s, _asqlite_counts
    else:
        import psycopg

        from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver

        url = request.getfixturevalue("pg_url")
        schema = f"tl_ttl_{uuid.uuid4().hex[:12]}"
        try:
            if kind == "postgres-async":
                async with AsyncPostgresSaver.from_conn_string(url, schema=schema, **options) as s:
                    await s.setup()
                    yield s, _pg_counts
            else:
                with PostgresSaver.from_conn_string(url, schema=schema, **options) as s:
                    s.setup()
                    yield s, _pg_counts
        finally:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


CASES = [
    ("memory", "sync"),
    ("memory", "async"),
    ("sqlite", "sync"),
    ("sqlite", "async"),
    ("sqlite-async", "async"),
    ("postgres", "sync"),
    ("postgres-async", "async"),
]


@pytest.fixture(params=[pytest.param(c, id=f"{c[0]}-{c[1]}") for c in CASES])
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


@pytest.fixture
def opener(case: tuple[str, str], request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    kind, mode = case

    @asynccontextmanager
    async def open_api(**options: Any) -> AsyncIterator[Api]:
        async with _open(kind, str(tmp_path), request, **options) as (raw, counts):
            yield Api(raw, mode, Backend(counts))

    return open_api


async def call(api: Api, name: str, *args: Any) -> Any:
    return await api._call(name, *args)


async def test_reads_refresh_the_clock_and_an_expired_thread_reads_as_gone(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        await grow(saver, 3, "a")
        clock.now += 60
        assert await saver.get_tuple(cfg("a")) is not None  # a read at +60 ...
        clock.now += 99
        assert len(await ids(saver, "a")) == 3  # ... keeps it alive past +100
        clock.now += 101  # 101 s after the last read: expired, not yet swept
        assert await saver.get_tuple(cfg("a")) is None
        assert await ids(saver, "a") == []
        assert await saver.list(None) == []


async def test_listing_every_thread_does_not_keep_them_alive(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        await grow(saver, 2, "a")
        await grow(saver, 2, "b")
        clock.now += 60
        assert len(await saver.list(None)) == 4
        assert await saver.get_tuple(cfg("b")) is not None  # a real read refreshes "b"
        clock.now += 41
        assert {t.config["configurable"]["thread_id"] for t in await saver.list(None)} == {"b"}
        assert await saver.get_tuple(cfg("a")) is None


async def test_sweep_erases_expired_threads_like_delete_thread(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        await grow(saver, 4, "keep")
        baseline = await saver.raw_counts()
        await grow(saver, 6, "gone")
        clock.now += 90
        await grow(saver, 1, "keep", start=4)  # a write refreshes "keep"
        clock.now += 20
        report = await call(saver, "sweep_expired")
        assert isinstance(report, PruneReport)
        assert report.checkpoints == 6 and report.blobs > 0
        after = await saver.raw_counts()
        assert after["blobs"] <= baseline["blobs"] + 1  # "keep" gained one version
        assert after["checkpoints"] == baseline["checkpoints"] + 1
        assert len(await ids(saver, "keep")) == 5
        assert await call(saver, "sweep_expired") == PruneReport()  # nothing left to do


async def test_a_write_to_an_expired_thread_starts_it_afresh(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        await grow(saver, 3, "a")
        clock.now += 150
        await grow(saver, 1, "a", start=10)  # old history must not resurface
        assert len(await ids(saver, "a")) == 1
        clock.now += 50
        assert await saver.get_tuple(cfg("a")) is not None


async def test_per_thread_ttl_overrides_the_default(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        for thread in ("short", "forever", "default"):
            await grow(saver, 2, thread)
        await call(saver, "set_thread_ttl", "short", 10)
        await call(saver, "set_thread_ttl", "forever", None)
        clock.now += 11
        assert await saver.get_tuple(cfg("short")) is None
        assert await saver.get_tuple(cfg("default")) is not None
        clock.now += 1000
        report = await call(saver, "sweep_expired")
        assert report.checkpoints == 4  # "short" and "default"
        assert len(await ids(saver, "forever")) == 2


async def test_without_ttl_nothing_expires_and_set_thread_ttl_still_works(opener) -> None:
    clock = Clock()
    async with opener(clock=clock) as saver:
        await grow(saver, 2, "a")
        await grow(saver, 2, "b")
        clock.now += 10**7
        assert await saver.get_tuple(cfg("a")) is not None
        assert (await call(saver, "sweep_expired")).checkpoints == 0
        await call(saver, "set_thread_ttl", "b", 5)
        clock.now += 6
        assert await saver.get_tuple(cfg("b")) is None
        assert (await call(saver, "sweep_expired")).checkpoints == 2
        assert len(await ids(saver, "a")) == 2


async def test_sweep_skips_a_thread_whose_lease_a_run_holds(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        await grow(saver, 2, "busy")
        clock.now += 200
        raw = saver.raw
        token = uuid.uuid4().hex
        if saver.mode == "sync":
            raw._run(acquire_flow("busy", "run-1", token, 60_000), True)
        else:
            await raw._arun(acquire_flow("busy", "run-1", token, 60_000), True)
        assert (await call(saver, "sweep_expired")).checkpoints == 0
        assert (await saver.raw_counts())["checkpoints"] == 2
        if saver.mode == "sync":
            raw._run(release_flow("busy", token), True)
        else:
            await raw._arun(release_flow("busy", token), True)
        assert (await call(saver, "sweep_expired")).checkpoints == 2
        assert (await saver.raw_counts())["checkpoints"] == 0


def test_ttl_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        InMemorySaver(ttl=0)
    with pytest.raises(ConfigError):
        InMemorySaver(ttl=10).set_thread_ttl("t", -1)


def test_a_thread_written_before_ttl_was_enabled_gets_a_clock(tmp_path: Any) -> None:
    path = str(tmp_path / "old.db")
    with SqliteSaver.from_conn_string(path) as plain:
        asyncio.run(grow(Api(plain, "sync", None), 2, "old"))
    clock = Clock()
    with SqliteSaver.from_conn_string(path, ttl=100, clock=clock) as saver:
        assert saver.sweep_expired().checkpoints == 0  # no clock yet: never swept blindly
        assert saver.get_tuple(cfg("old")) is not None  # the first read starts its clock
        clock.now += 101
        assert saver.get_tuple(cfg("old")) is None
        assert saver.sweep_expired().checkpoints == 2


async def test_put_step_restarts_the_clock_like_put_writes(opener) -> None:
    """``put_step``/``put_steps`` (one transaction per superstep) touch the clocks
    of the threads they write, as ``put_writes``/``put`` do one call at a time."""
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        configs = await grow(saver, 1, "a")
        clock.now += 90
        writes = [(configs[-1], [("doc", "w")], "task-1", "")]
        assert await call(saver, "put_step", writes, None) is None
        clock.now += 90  # 180 s after the first write, 90 after the put_step
        assert await saver.get_tuple(cfg("a")) is not None
        clock.now += 90
        await call(saver, "put_steps", [(writes, None)])
        clock.now += 90
        assert await saver.get_tuple(cfg("a")) is not None
        clock.now += 101
        assert await saver.get_tuple(cfg("a")) is None

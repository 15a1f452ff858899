"""Per-thread TTL defects a session 8 review confirmed (each once a repro in
/tmp/s8/review/), on the memory, SQLite and Postgres savers, sync and async:

1. a thread given its own TTL shorter than ``ttl_touch_every`` expired while in
   use (its clock row was refreshed once per ``ttl_touch_every`` only), and its
   next write erased its history;
2. ``copy_thread`` from an expired, not yet swept thread brought its history
   back under the target id;
3. ``delete_thread`` (and ``prune(strategy="delete")``) left the thread's clock
   row, so a new thread reusing the id inherited its override.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from typing import Any

import pytest

from tests.savers import test_ttl
from tests.savers.api import Api
from tests.savers.test_retention import cfg, grow, ids
from tests.savers.test_ttl import Clock, call
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.lease.lease import FencedSaver, Lease
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.storage.ttl import FOREVER, ReadClock
from threadloom.errors import ConfigError

# the savers x (sync, async) fixtures of tests/savers/test_ttl.py
case, opener = test_ttl.case, test_ttl.opener


def _read_clock(thread_id: str) -> Generator[Any, Any, Any]:
    return (yield ReadClock(thread_id))


async def clock_row(saver: Api, thread_id: str) -> Any:
    """The thread's stored clock ``(touched_at, ttl override)``, or None."""
    if saver.mode == "sync":
        return saver.raw._run(_read_clock(thread_id))
    return await saver.raw._arun(_read_clock(thread_id))


# -- 1. a thread's own TTL sets how often its clock is refreshed -------------------


@pytest.mark.parametrize("saver_ttl", [None, 3600])
async def test_a_short_own_ttl_keeps_a_thread_alive_while_it_is_read(opener, saver_ttl) -> None:
    clock = Clock()
    async with opener(ttl=saver_ttl, clock=clock) as saver:
        await call(saver, "set_thread_ttl", "chat", 10)
        await grow(saver, 1, "chat")
        for _ in range(5):  # a read every 4 s: never idle for 10 s
            clock.now += 4
            assert await saver.get_tuple(cfg("chat")) is not None
        clock.now += 11  # idle past its own TTL: gone
        assert await saver.get_tuple(cfg("chat")) is None


@pytest.mark.parametrize("saver_ttl", [None, 3600])
async def test_a_short_own_ttl_thread_written_in_use_keeps_its_history(opener, saver_ttl) -> None:
    clock = Clock()
    async with opener(ttl=saver_ttl, clock=clock) as saver:
        await call(saver, "set_thread_ttl", "chat", 10)
        for i in range(4):  # a write every 4 s
            await grow(saver, 1, "chat", start=i)
            clock.now += 4
        assert len(await ids(saver, "chat")) == 4
        assert (await call(saver, "sweep_expired")).checkpoints == 0  # in use: not swept
        assert len(await ids(saver, "chat")) == 4


def _sqlite(**options: Any) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False), **options)


@pytest.mark.parametrize("make", [InMemorySaver, _sqlite])
def test_ttl_touch_every_must_be_below_ttl(make) -> None:
    for every in (10, 11):
        with pytest.raises(ConfigError, match="ttl_touch_every"):
            make(ttl=10, ttl_touch_every=every)
    assert make(ttl=10, ttl_touch_every=9).ttl_touch_every == 9
    assert make(ttl_touch_every=120).ttl_touch_every == 120  # no saver ttl: own TTLs bound it


# -- 2. copy_thread reads the source's clock --------------------------------------


async def test_copy_from_an_expired_source_copies_nothing(opener) -> None:
    clock = Clock()
    async with opener(ttl=10, clock=clock) as saver:
        await grow(saver, 2, "old")
        clock.now += 100
        assert await saver.get_tuple(cfg("old")) is None  # expired, not yet swept
        await saver.copy_thread("old", "new")
        assert await saver.get_tuple(cfg("new")) is None
        assert await ids(saver, "new") == []
        await grow(saver, 1, "new", start=5)  # the target starts empty
        assert len(await ids(saver, "new")) == 1


async def test_copy_reads_the_source_clock_without_touching_it(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        await grow(saver, 2, "src")
        clock.now += 60
        await saver.copy_thread("src", "dst")
        clock.now += 60  # 120 s after the source's last use, 60 after the copy
        assert await saver.get_tuple(cfg("src")) is None
        assert len(await ids(saver, "dst")) == 2  # the copy restarted the target's clock


async def test_copy_into_an_expired_target_erases_its_leftovers_first(opener) -> None:
    clock = Clock()
    async with opener(ttl=100, clock=clock) as saver:
        await grow(saver, 3, "dst")
        clock.now += 150
        await grow(saver, 2, "src", start=10)
        await saver.copy_thread("src", "dst")
        assert len(await ids(saver, "dst")) == 2  # the expired 3 do not come back


async def test_copy_onto_itself_still_refused(opener) -> None:
    async with opener(ttl=100, clock=Clock()) as saver:
        await grow(saver, 1, "a")
        with pytest.raises(ConfigError):
            await saver.copy_thread("a", "a")


# -- 3. the clock row goes with the thread -----------------------------------------


@pytest.mark.parametrize("saver_ttl", [None, 10])
async def test_delete_thread_drops_the_clock_and_its_override(opener, saver_ttl) -> None:
    clock = Clock()
    async with opener(ttl=saver_ttl, clock=clock) as saver:
        await grow(saver, 2, "user-42")
        await call(saver, "set_thread_ttl", "user-42", None)
        assert (await clock_row(saver, "user-42"))[1] == FOREVER
        await saver.delete_thread("user-42")
        assert await clock_row(saver, "user-42") is None
        if saver_ttl is not None:  # a new thread with the same id lives by the default
            await grow(saver, 1, "user-42")
            clock.now += 11
            assert await saver.get_tuple(cfg("user-42")) is None


async def test_prune_delete_drops_the_clock_other_strategies_keep_it(opener) -> None:
    async with opener(ttl=100, clock=Clock()) as saver:
        for thread in ("a", "b"):
            await grow(saver, 3, thread)
            await call(saver, "set_thread_ttl", thread, 50)
        await saver.prune(["a"], strategy="keep_latest")
        await saver.prune(["b"], strategy="delete", dry_run=True)
        assert (await clock_row(saver, "a"))[1] == 50
        assert (await clock_row(saver, "b"))[1] == 50
        await saver.prune(["b"], strategy="delete")
        assert await clock_row(saver, "b") is None
        assert await ids(saver, "b") == []


def test_through_a_fenced_saver() -> None:
    """A run's FencedSaver builds the same flows (StorageSaver._*_flow)."""
    clock = Clock()
    saver = InMemorySaver(ttl=10, clock=clock)
    for thread in ("mine", "old"):
        saver.put(cfg(thread), empty_checkpoint(), {"step": 0}, {})
    saver.set_thread_ttl("mine", None)
    lease = Lease(saver, "mine", "run-A", ttl=30)
    assert lease.try_acquire() is None
    fenced = FencedSaver(saver, lease)
    clock.now += 100  # "old" expired, "mine" never expires
    fenced.copy_thread("old", "mine")
    assert len(list(saver.list(cfg("mine")))) == 1  # nothing of "old" came in
    fenced.delete_thread("mine")
    assert saver._run(_read_clock("mine")) is None
    lease.release()

"""``prune(strategy="delete")`` given its ids as a one-pass iterable (a generator,
``dict.keys()`` views are fine already) on a TTL saver: the base flow read the
generator, so the clock rows were dropped for no thread and a new thread
reusing an id inherited the erased one's "never expires" (review3 r2)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from tests.savers import test_ttl
from tests.savers.test_retention import cfg, grow, ids
from tests.savers.test_ttl import Clock, call
from tests.storage.test_ttl_review import clock_row
from threadloom.errors import ConfigError

case, opener = test_ttl.case, test_ttl.opener  # the savers x (sync, async) fixtures


def _once(*thread_ids: str) -> Generator[str, None, None]:
    yield from thread_ids


async def test_prune_delete_of_a_generator_drops_every_clock_row(opener) -> None:
    clock = Clock()
    async with opener(ttl=10, clock=clock) as saver:
        for thread in ("a", "b", "kept"):
            await grow(saver, 2, thread)
            await call(saver, "set_thread_ttl", thread, None)  # never expires
        await saver.prune(_once("a", "b"), strategy="delete")
        assert await ids(saver, "a") == [] and await ids(saver, "b") == []
        assert await clock_row(saver, "a") is None
        assert await clock_row(saver, "b") is None
        assert await clock_row(saver, "kept") is not None
        await grow(saver, 1, "a")  # a new thread reusing the id lives by the default
        clock.now += 11
        assert await saver.get_tuple(cfg("a")) is None
        assert await saver.get_tuple(cfg("kept")) is not None


async def test_prune_keep_latest_of_a_generator_still_prunes(opener) -> None:
    async with opener(ttl=100, clock=Clock()) as saver:
        await grow(saver, 3, "a")
        await saver.prune(_once("a"), strategy="keep_latest")
        assert len(await ids(saver, "a")) == 1
        assert await clock_row(saver, "a") is not None


@pytest.mark.parametrize("bad", ["a", b"a"])
async def test_prune_of_one_bare_id_is_still_refused(opener, bad: Any) -> None:
    async with opener(ttl=100, clock=Clock()) as saver:
        await grow(saver, 1, "a")
        with pytest.raises(ConfigError):
            await saver.prune(bad, strategy="delete")
        assert len(await ids(saver, "a")) == 1

"""Races with other processes and threads, on every backend.

* A writer's caches (its last state = the diff base, its last list's chunks)
  can outlive what another process prunes or deletes. The next put must notice
  (``SaveResult.stale``) and store in full, never leave an unreadable record.
  "Another process" is simulated by running retention and then putting the
  writer's caches back as they were before it.
* Two ``put_writes`` of the same task at once must both land (Redis has no
  multi-command transactions: the write is a compare-and-set there).
"""

from __future__ import annotations

import threading

import pytest

from tests.savers.test_retention import BIG, grow
from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.constants import ERROR, INTERRUPT, RESUME, SCHEDULED


def _caches(raw) -> tuple:
    codec = raw.codec
    return codec.states.items(), codec.lists.items()


def _restore(raw, caches: tuple) -> None:
    states, lists = caches
    for lru, data in ((raw.codec.states, states), (raw.codec.lists, lists)):
        lru.clear()
        for key, value in data:
            lru.put(key, value)


async def _next(saver, parent: dict, i: int, messages: list) -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=100 + i))
    versions = {"messages": f"{100 + i:032}.0.1", "doc": "1"}
    cp["channel_values"] = {"messages": messages, "doc": {"body": BIG}}
    cp["channel_versions"] = versions
    return await saver.put(
        parent, cp, {"source": "loop", "step": i}, {"messages": versions["messages"]}
    )


@pytest.mark.parametrize("retention", ["delete_thread", "delete_for_runs", "prune"])
async def test_put_after_another_process_removed_its_bases(saver, retention) -> None:
    configs = await grow(saver, 6, run=["r1"] * 3 + ["r2"] * 3)
    # the writer continues from the tip, or (prune) forks from an older checkpoint
    parent = configs[-2] if retention == "prune" else configs[-1]
    seen = await saver.get_tuple(parent)  # fills the caches: diff base + list chunks
    caches = _caches(saver.raw)
    if retention == "delete_thread":
        await saver.delete_thread("t")
    elif retention == "delete_for_runs":
        await saver.delete_for_runs(["r2"])  # the tip (the writer's diff base) goes
    else:
        await saver.prune(["t"], strategy="keep_latest")
    _restore(saver.raw, caches)  # as if another process had done the retention
    messages = seen.checkpoint["channel_values"]["messages"] + ["after the purge " + BIG]
    stored = await _next(saver, parent, 1, messages)
    saver.raw.codec.states.clear()
    saver.raw.codec.chunks.clear()
    got = await saver.get_tuple(stored)
    assert got.checkpoint["channel_values"]["messages"] == messages
    assert got.checkpoint["channel_values"]["doc"] == {"body": BIG}
    await saver.delete_thread("t")
    assert all(n == 0 for n in (await saver.raw_counts()).values())


async def test_concurrent_put_writes_of_one_task_all_land(saver) -> None:
    if saver.mode != "sync":
        pytest.skip("threads drive the sync API")
    configs = await grow(saver, 1)
    writes = [[(ERROR, "e")], [(SCHEDULED, "s")], [(INTERRUPT, "i")], [(RESUME, "r")], [("x", 1)]]
    for round_ in range(6):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=50 + round_))
        config = await saver.put(configs[0], cp, {"step": round_}, {})
        barrier = threading.Barrier(len(writes))
        errors: list[BaseException] = []

        def write(ws: list, config: dict = config, barrier=barrier, errors=errors) -> None:
            try:
                barrier.wait()
                saver.raw.put_writes(config, ws, "task", "~p")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(ws,)) for ws in writes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        got = await saver.get_tuple(config)
        assert sorted(c for _, c, _ in got.pending_writes) == sorted(w[0][0] for w in writes)


async def test_put_writes_merges_a_task_row_another_process_wrote(saver) -> None:
    """A task's first put_writes in this process may skip reading its row (the
    executor checks that none exists); a row another process wrote is merged
    with LangGraph's first-wins rule, and references stay exact."""
    (config,) = await grow(saver, 1)
    await saver.put_writes(config, [("a", "first " + BIG), ("b", 1)], "task", "~p")
    saver.raw.codec.tasks.clear()  # this process forgets it wrote the row
    later = [("a", "second " + BIG), ("b", 2), ("c", "new " + BIG)]
    await saver.put_writes(config, later, "task", "~p")
    got = await saver.get_tuple(config)
    assert [(c, v) for _, c, v in got.pending_writes] == [
        ("a", "first " + BIG),
        ("b", 1),
        ("c", "new " + BIG),
    ]
    await saver.delete_thread("t")
    assert all(n == 0 for n in (await saver.raw_counts()).values())

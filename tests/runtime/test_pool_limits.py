"""The pool's file descriptors (``pool.py``): a hand-off worker's pipe costs two
fds for as long as it lives, so only ``pipe_workers`` of them own one; past the
cap, or when ``os.pipe()`` fails, an async run's sync node still runs, on a
queue-woken worker (review3: 600 concurrent ainvokes under ``ulimit -n 1024``
failed 80-85 runs with EMFILE as the node's own error)."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest

from threadloom.pregel.pool import ElasticPool, _Worker


def _pipe_workers(pool: ElasticPool) -> int:
    return sum(isinstance(w, _Worker) for w in [*pool._hand, *pool._spill])


async def test_at_most_the_cap_of_concurrent_hand_off_workers_own_a_pipe() -> None:
    loop = asyncio.get_running_loop()
    pool = ElasticPool(idle_timeout=5.0, pipe_workers=3)
    together = threading.Barrier(10, timeout=10)  # the pool never queues: all 10 run at once

    def job() -> int:
        together.wait()
        return threading.get_ident()

    idents = await asyncio.gather(*(pool.run_async(loop, job) for _ in range(10)))
    assert len(set(idents)) == 10
    assert (len(pool._pipes), _pipe_workers(pool), len(pool._spill)) == (3, 3, 7)
    # the next hop goes to an idle pipe worker first (the warm path), not a spilled one
    inside = await pool.run_async(loop, lambda: (len(pool._hand), len(pool._spill)))
    assert inside == (2, 7)


async def test_a_job_runs_when_the_pool_cannot_make_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    pool = ElasticPool(idle_timeout=5.0)

    def no_pipe() -> tuple[int, int]:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_pipe)
    assert await pool.run_async(loop, lambda: 42) == 42
    with pytest.raises(ValueError, match="the node's own"):
        await pool.run_async(loop, _fails)
    assert pool._pipes == set()
    assert pool._hand == [] and len(pool._spill) == 1  # one warm queue worker took both
    monkeypatch.undo()
    assert await pool.run_async(loop, lambda: 43) == 43  # reuses the idle queue worker
    assert len(pool._spill) == 1


def _fails() -> None:
    raise ValueError("the node's own error")

"""A paused stream is a live run: its lease keeps its thread from expiring
until the stream is closed or exhausted (docs/storage.md, "Per-thread TTL").

reviewttl: a sync ``app.stream()`` iterated once and kept un-advanced renews its
lease for as long as the generator exists, so ``sweep_expired`` never removes
the thread; ``gen.close()`` ends the run, and the thread then expires ``ttl``
after the release.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

import pytest

from tests.appending import appending
from tests.savers.test_ttl import Clock
from threadloom.checkpoint.lease.ops import read_flow
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver

CONFIG = {"configurable": {"thread_id": "t"}}
LEASE_TTL = 0.6  # renewed every 0.2 s by the background renewer


def _graph(saver: Any) -> Any:
    return appending("a", "b").compile(checkpointer=saver)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_paused_stream_holds_its_thread_until_closed(kind, tmp_path):
    clock = Clock()
    with ExitStack() as stack:
        if kind == "memory":
            saver = InMemorySaver(ttl=1, clock=clock)
        else:
            path = str(tmp_path / "s.db")
            saver = stack.enter_context(SqliteSaver.from_conn_string(path, ttl=1, clock=clock))
        saver.lease_ttl = LEASE_TTL
        app = _graph(saver)
        app.invoke({"n": ["x"]}, CONFIG)
        gen = app.stream({"n": ["y"]}, CONFIG)
        stack.callback(gen.close)
        next(gen)  # the run is paused after its first step
        clock.now += 5  # well past the thread's ttl
        time.sleep(3 * LEASE_TTL)  # and past the lease's own TTL, unless renewed
        assert saver._run(read_flow("t")) is not None
        assert saver.sweep_expired().checkpoints == 0
        assert saver.get_tuple(CONFIG) is not None
        gen.close()  # ends the run: its lease is released, the clock restarts
        assert saver._run(read_flow("t")) is None
        assert saver.sweep_expired().checkpoints == 0
        clock.now += 2
        assert saver.sweep_expired().checkpoints > 0
        assert saver.get_tuple(CONFIG) is None

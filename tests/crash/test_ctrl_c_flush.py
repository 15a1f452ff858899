"""Ctrl-C landing while a sync run's final flush saves its queued steps
(``durability="async"``): the finished steps are still saved before the run
releases its thread. Before, the interrupted batch was left to the pool thread,
whose save came after the lease was released and was refused: the whole run
was lost (input included)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.graph import END, START, StateGraph


class State(TypedDict):
    n: int


def _chain() -> Any:
    builder = StateGraph(State)
    prev = START
    for i in range(6):
        builder.add_node(f"n{i}", lambda s: {"n": s["n"] + 1})
        builder.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    return builder.add_edge(prev, END)


@pytest.fixture
def late_pool(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The persister's pool job starts only once the run has returned (the worst
    schedule: on a busy GIL the pool thread often starts that late)."""
    from threadloom.pregel import pool

    held: list[Any] = []
    monkeypatch.setattr(pool.POOL, "spawn", held.append)
    return held


def test_ctrl_c_during_the_final_flush_loses_no_step(tmp_path, late_pool) -> None:
    path, cfg = str(tmp_path / "c.db"), {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(path) as saver:
        inner, writes = saver._run, []

        def run(flow: Any, write: bool = False) -> Any:
            if write:
                writes.append(threading.current_thread() is threading.main_thread())
                if len(writes) == 2 and writes[-1]:  # 1: the lease, 2: the flush's save
                    raise KeyboardInterrupt  # Ctrl-C lands on the run's thread
            return inner(flow, write)

        saver._run = run
        app = _chain().compile(checkpointer=saver)
        with pytest.raises(KeyboardInterrupt):
            app.invoke({"n": 0}, cfg, durability="async")
        saver._run = inner
        for job in late_pool:  # the pool jobs run now, after the lease was given back
            job()
        app.invoke(None, cfg, durability="async")  # the thread is free again
    with SqliteSaver.from_conn_string(path) as saver:
        app = _chain().compile(checkpointer=saver)
        assert app.get_state(cfg).values == {"n": 6}
        assert [s.metadata["step"] for s in app.get_state_history(cfg)] == [6, 5, 4, 3, 2, 1, 0, -1]

"""A run that asked the holder to stop (``multitask_strategy`` interrupt/rollback)
and then gave up waiting (its ``multitask_timeout``, a drain) takes its request
back: the holder runs on, its work intact. Before, the holder stopped at its
next step anyway, and a rollback deleted its whole run for a run that never
came (review3 G5). Every backend."""

from __future__ import annotations

import threading
import time

import pytest
from typing_extensions import TypedDict

from tests.savers.backends import BACKENDS
from threadloom.errors import ThreadBusyError
from threadloom.graph import END, START, StateGraph

SYNC = [b for b in BACKENDS if b.sync_api]


class State(TypedDict):
    log: list


def _chain(step_s: float):
    builder = StateGraph(State)
    prev = START
    for i in range(4):

        def node(state: State, i: int = i) -> dict:
            time.sleep(step_s)
            return {"log": state["log"] + [i]}

        builder.add_node(f"n{i}", node).add_edge(prev, f"n{i}")
        prev = f"n{i}"
    return builder.add_edge(prev, END)


@pytest.mark.parametrize("strategy", ["rollback", "interrupt"])
@pytest.mark.parametrize("backend", SYNC, ids=[b.name for b in SYNC])
async def test_a_request_is_withdrawn_when_its_run_gives_up(backend, strategy, tmp_path, request):
    fixtures = {name: request.getfixturevalue(name) for name in backend.needs}
    cfg = {"configurable": {"thread_id": f"withdrawn-{strategy}"}}
    async with backend.open(str(tmp_path), fixtures) as saver:
        app = _chain(0.25).compile(checkpointer=saver)
        out: dict = {}
        holder = threading.Thread(target=lambda: out.update(a=app.invoke({"log": ["A"]}, cfg)))
        holder.start()
        seen = 0
        while seen < 2:  # right after a step boundary: the next is 0.25 s away, B waits 0.05 s
            seen = len(list(app.get_state_history(cfg)))
            time.sleep(0.005)
        with pytest.raises(ThreadBusyError):
            app.invoke({"log": ["B"]}, cfg, multitask_strategy=strategy, multitask_timeout=0.05)
        holder.join(30)
        assert out.get("a") == {"log": ["A", 0, 1, 2, 3]}
        assert app.get_state(cfg).values == {"log": ["A", 0, 1, 2, 3]}


async def test_withdrawal_survives_repeated_cancels(tmp_path) -> None:
    """The asking run is cancelled by an anyio cancel scope, which cancels again
    and again: its withdrawal is still sent to its end, so the holder finishes
    intact (review4 H1: the second cancel cut the withdrawal off and the holder
    was rolled back for nobody)."""
    import asyncio

    anyio = pytest.importorskip("anyio")
    from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver

    cfg = {"configurable": {"thread_id": "anyio"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "w.db")) as saver:
        app = _chain(0.25).compile(checkpointer=saver)
        holder = asyncio.ensure_future(app.ainvoke({"log": ["A"]}, cfg))
        seen = 0
        while seen < 2:
            seen = len([s async for s in app.aget_state_history(cfg)])
            await asyncio.sleep(0.005)
        with anyio.move_on_after(0.05):
            await app.ainvoke(
                {"log": ["B"]}, cfg, multitask_strategy="rollback", multitask_timeout=10
            )
        assert await holder == {"log": ["A", 0, 1, 2, 3]}

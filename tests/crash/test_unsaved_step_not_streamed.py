"""``durability="sync"``: a step whose save fails is not streamed as done. Before,
the driver's error path handed out the values the step emitted before its save
failed, so a client showed a result that was never stored (review2 F6; LangGraph
never streams such a step). Sync and async, a failing save at each step."""

from __future__ import annotations

from typing import Any

import pytest

from tests.crash.test_ctrl_c_flush import _chain
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver


def _failing(saver: Any, attr: str, at: int) -> Any:
    inner, count = getattr(saver, attr), [0]

    def fail_at(flow: Any, write: bool = False) -> Any:
        if write:
            count[0] += 1
            if count[0] == at:
                raise ConnectionError("db down")
        return inner(flow, write)

    setattr(saver, attr, fail_at)
    return inner


@pytest.mark.parametrize("at", [2, 3, 4, 5])
def test_sync_stream_never_shows_an_unsaved_step(tmp_path, at: int) -> None:
    cfg = {"configurable": {"thread_id": "t"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
        inner = _failing(saver, "_run", at)
        app = _chain().compile(checkpointer=saver)
        streamed: list[int] = []
        with pytest.raises(ConnectionError):
            for values in app.stream({"n": 0}, cfg, durability="sync", stream_mode="values"):
                streamed.append(values["n"])
        saver._run = inner
        stored = app.get_state(cfg).values.get("n")
        assert not streamed or (stored is not None and streamed[-1] <= stored)


@pytest.mark.parametrize("at", [2, 3, 4, 5])
async def test_async_stream_never_shows_an_unsaved_step(tmp_path, at: int) -> None:
    cfg = {"configurable": {"thread_id": "t"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        inner = saver._arun
        count = [0]

        async def fail_at(flow: Any, write: bool = False) -> Any:
            if write:
                count[0] += 1
                if count[0] == at:
                    raise ConnectionError("db down")
            return await inner(flow, write)

        saver._arun = fail_at
        app = _chain().compile(checkpointer=saver)
        streamed: list[int] = []
        with pytest.raises(ConnectionError):
            async for values in app.astream({"n": 0}, cfg, durability="sync", stream_mode="values"):
                streamed.append(values["n"])
        saver._arun = inner
        stored = (await app.aget_state(cfg)).values.get("n")
        assert not streamed or (stored is not None and streamed[-1] <= stored)

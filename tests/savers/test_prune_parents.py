"""After retention, no kept checkpoint names a parent that is gone.

Probe finding (session 12): after ``prune(strategy="keep_latest")`` the kept
checkpoint's ``parent_config`` still named a checkpoint prune had deleted, so
``get_state(snapshot.parent_config)`` raised ``CheckpointNotFoundError``.
LangGraph's PostgresSaver leaves such a checkpoint with no parent; so does
threadloom now, on every backend, for every strategy and for
``delete_for_runs``. Time travel from the oldest kept checkpoint still works.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.savers.test_retention import cfg, grow, ids
from tests.savers.test_retention_review import S as Log
from tests.savers.test_retention_review import _graph, _invoke
from tests.savers.test_ttl import Clock
from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.errors import ConfigError
from threadloom.graph import START, StateGraph

STRATEGIES = [
    pytest.param({"strategy": "keep_latest"}, id="keep_latest"),
    pytest.param({"strategy": "keep_last_n", "keep_last": 3}, id="keep_last_n"),
    pytest.param({"strategy": "before"}, id="before"),
]


async def dangling(saver, thread: str) -> list[tuple[str, str, str]]:
    """(ns, id, missing parent id) of every checkpoint of ``thread`` whose parent is gone."""
    found = []
    for tup in await saver.list({"configurable": {"thread_id": thread}}):
        if tup.parent_config is not None and await saver.get_tuple(tup.parent_config) is None:
            conf = tup.config["configurable"]
            parent = tup.parent_config["configurable"]["checkpoint_id"]
            found.append((conf["checkpoint_ns"], conf["checkpoint_id"], parent))
    return found


async def _history(saver, app, config: dict) -> list[Any]:
    if saver.mode == "sync":
        return list(app.get_state_history(config))
    return [s async for s in app.aget_state_history(config)]


async def _state(saver, app, config: dict) -> Any:
    if saver.mode == "sync":
        return app.get_state(config)
    return await app.aget_state(config)


@pytest.mark.parametrize("how", STRATEGIES)
async def test_no_kept_checkpoint_names_a_deleted_parent(saver, how: dict) -> None:
    app, config = _graph(saver.raw, [], ask=True), {"configurable": {"thread_id": "g"}}
    for i in range(3):
        await _invoke(saver, app, {"log": [str(i)]}, config)
    await _invoke(saver, app, {"log": ["ask"]}, config)  # stops inside the subgraph
    if how["strategy"] == "before":
        how = {**how, "before": (await ids(saver, "g"))[3]}
    await saver.prune(["g"], **how)
    assert await dangling(saver, "g") == []
    history = await _history(saver, app, config)
    assert history and history[-1].parent_config is None  # the oldest kept: no parent
    for snap in history:
        if snap.parent_config is not None:  # every named parent reads
            assert (await _state(saver, app, snap.parent_config)).values is not None
    assert (await _state(saver, app, config)).next == ("child",)  # still interrupted


async def test_keep_last_n_unlinks_and_rebases_the_oldest_kept(saver) -> None:
    configs = await grow(saver, 20)  # diff chains cross the deleted rows (keyframe every 16)
    for c in configs:  # warm every read cache with the old parents
        assert (await saver.get_tuple(c)).parent_config is not None or c is configs[0]
    await saver.prune(["t"], strategy="keep_last_n", keep_last=5)
    oldest = await saver.get_tuple(configs[-5])
    assert oldest.parent_config is None
    assert len(oldest.checkpoint["channel_values"]["messages"]) == 16
    assert (await saver.get_tuple(configs[-4])).parent_config["configurable"][
        "checkpoint_id"
    ] == configs[-5]["configurable"]["checkpoint_id"]
    assert await dangling(saver, "t") == []
    listed = await saver.list(cfg("t"), before=configs[-4])  # list(before=) from the oldest
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [
        configs[-5]["configurable"]["checkpoint_id"]
    ]
    assert listed[0].parent_config is None


async def test_delete_for_runs_unlinks_the_next_run(saver) -> None:
    configs = await grow(saver, 9, run=["r1"] * 3 + ["r2"] * 3 + ["r3"] * 3)  # one chain
    await saver.delete_for_runs(["r2"])
    first_of_r3 = await saver.get_tuple(configs[6])
    assert first_of_r3.parent_config is None
    assert len(first_of_r3.checkpoint["channel_values"]["messages"]) == 7
    assert len(await ids(saver)) == 6
    assert await dangling(saver, "t") == []


async def test_copy_after_prune_names_no_missing_parent(saver) -> None:
    await grow(saver, 6)
    await saver.prune(["t"], strategy="keep_last_n", keep_last=2)
    await saver.copy_thread("t", "t2")
    assert len(await ids(saver, "t2")) == 2
    assert await dangling(saver, "t2") == []


async def test_fork_and_replay_from_the_oldest_kept(saver) -> None:
    ran: list[str] = []
    app, config = _graph(saver.raw, ran, ask=False), {"configurable": {"thread_id": "g"}}
    for i in range(3):
        await _invoke(saver, app, {"log": [str(i)]}, config)
    await saver.prune(["g"], strategy="keep_last_n", keep_last=2)
    oldest = (await _history(saver, app, config))[-1]
    assert oldest.parent_config is None and oldest.next == ("child",)
    before = len(ran)
    replayed = await _invoke(saver, app, None, oldest.config)  # replay from it
    assert ran[before:] == ["first"]  # the subgraph runs again from the kept state
    assert replayed["log"] == ["0", "a", "1", "a", "2", "a"] and replayed["note"] == "sub -"
    if saver.mode == "sync":
        forked = app.update_state(oldest.config, {"log": ["fork"]})
    else:
        forked = await app.aupdate_state(oldest.config, {"log": ["fork"]})
    fork_state = await _state(saver, app, forked)
    assert (
        fork_state.parent_config["configurable"]["checkpoint_id"]
        == (oldest.config["configurable"]["checkpoint_id"])
    )
    assert fork_state.values["log"][-1] == "fork"
    assert await dangling(saver, "g") == []


async def _delta_thread(saver) -> list[dict]:
    """Checkpoints as LangGraph writes them between DeltaChannel snapshots: the
    value is missing and ``counters_since_delta_snapshot`` names the channel."""
    configs, parent = [], cfg("d")
    for i in range(5):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        cp["channel_versions"] = {"items": f"{i + 1:032}.0.1"}
        md: dict[str, Any] = {"source": "loop", "step": i, "parents": {}}
        if i < 2:
            cp["channel_values"] = {"items": list(range(i + 1))}  # a snapshot
        else:
            md["counters_since_delta_snapshot"] = {"items": [i - 1, i - 1]}
        parent = await saver.put(parent, cp, md, {"items": cp["channel_versions"]["items"]})
        configs.append(parent)
    return configs


async def test_keep_latest_keeps_what_a_langgraph_delta_checkpoint_rebuilds_from(saver) -> None:
    configs = await _delta_thread(saver)
    await saver.prune(["d"], strategy="keep_latest")
    kept = [c["configurable"]["checkpoint_id"] for c in configs[1:]]
    assert await ids(saver, "d") == kept[::-1]  # back to the last snapshot, not further
    assert (await saver.get_tuple(configs[1])).parent_config is None  # it holds the value
    meta = (await saver.get_tuple(configs[-1])).metadata
    assert json.loads(json.dumps(meta))["counters_since_delta_snapshot"] == {"items": [3, 3]}
    assert await dangling(saver, "d") == []


async def test_prune_of_one_bare_id_is_a_type_error(saver) -> None:
    await grow(saver, 2)
    with pytest.raises(TypeError, match=r"thread_ids must be a list.*\['t'\]") as info:
        await saver.prune("t")
    assert isinstance(info.value, ConfigError)  # still a ConfigError / ValueError
    assert len(await ids(saver)) == 2


def test_storage_md_prune_example_runs() -> None:
    """The runnable example of docs/storage.md "Retention" runs as written."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "storage.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)
    example = next(b for b in blocks if "oldest.parent_config is None" in b)
    scope: dict = {"__name__": "storage_md"}
    exec(compile(example, str(doc), "exec", dont_inherit=True), scope)
    assert scope["oldest"].parent_config is None


def _idling_graph(saver: Any, clock: Clock) -> Any:
    """START -> a -> slow (idles past the TTL) -> b."""

    def slow(state: Any) -> dict:
        clock.now += 500  # the thread expires while this node runs
        return {"log": ["slow"]}

    builder = StateGraph(Log)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("slow", slow)
    builder.add_node("b", lambda s: {"log": ["b"]})
    builder.add_edge(START, "a").add_edge("a", "slow").add_edge("slow", "b")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_write_that_erases_an_expired_thread_names_no_parent(
    kind: str, durability: str, tmp_path: Any
) -> None:
    clock = Clock()
    with contextlib.ExitStack() as stack:
        if kind == "memory":
            saver = InMemorySaver(ttl=100, clock=clock)
        else:
            opened = SqliteSaver.from_conn_string(str(tmp_path / "t.db"), ttl=100, clock=clock)
            saver = stack.enter_context(opened)
        graph, config = _idling_graph(saver, clock), {"configurable": {"thread_id": "x"}}
        graph.invoke({"log": []}, config, durability=durability)
        for tup in saver.list(config):  # what the run saved after the thread expired
            assert tup.parent_config is None or saver.get_tuple(tup.parent_config) is not None
        history = list(graph.get_state_history(config))
        assert history and history[-1].parent_config is None
        old = saver.put(  # a raw put naming a checkpoint of the expired thread
            history[0].config, {**empty_checkpoint(), "id": str(uuid6())}, {"step": 9}, {}
        )
        clock.now += 500
        fresh = {**empty_checkpoint(), "id": str(uuid6())}
        new = saver.put(old, fresh, {"step": 10}, {})
        assert saver.get_tuple(new).parent_config is None

"""Direct checkpointer calls a port makes that the graph runtime never does
(session 13's saver probe): every backend, both APIs."""

from __future__ import annotations

import datetime
import re
import uuid

import pytest

from tests.savers.test_basic import cfg, put_chain
from threadloom.errors import ConfigError, SerializationError


@pytest.mark.parametrize(
    "config",
    [
        {"configurable": {}},
        {"configurable": {"thread_id": None}},
        {"configurable": {"thread_id": ""}},
    ],
)
async def test_list_with_a_config_naming_no_thread_is_refused(saver, config) -> None:
    """It listed every thread's checkpoints: one user's data shown to another."""
    await put_chain(saver, 1, thread="alice")
    await put_chain(saver, 1, thread="bob")
    with pytest.raises(ConfigError, match="thread_id"):
        await saver.list(config)
    assert len(await saver.list(None)) == 2  # None still means every thread


async def test_an_empty_checkpoint_id_means_the_latest(saver) -> None:
    configs = await put_chain(saver, 2)
    latest = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": ""}}
    assert (await saver.get_tuple(latest)).config == configs[-1]
    assert (await saver.get(latest))["channel_values"] == {"x": 1}
    assert [t.config for t in await saver.list(latest)] == configs[::-1]


@pytest.mark.parametrize(
    "value, where",
    [
        (datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc), "when"),
        ({"at": uuid.UUID(int=1)}, "when.at"),
        ([1, b"x"], "when[1]"),
        ({1, 2}, "when"),
        (object(), "when"),
        (float("nan"), "when"),
        ({"x": [float("inf")]}, "when.x[0]"),
    ],
)
async def test_metadata_json_cannot_hold_is_refused_not_stringified(saver, value, where) -> None:
    """A datetime came back a str, an object its repr, a set a list, silently."""
    with pytest.raises(SerializationError, match=re.escape(f"metadata at {where} ")) as err:
        await saver.put(cfg(), _checkpoint(), {"source": "input", "step": -1, "when": value}, {})
    assert err.value.path == where
    assert await saver.get_tuple(cfg()) is None  # nothing half-stored


async def test_plain_metadata_round_trips(saver) -> None:
    md = {
        "source": "input",
        "step": -1,
        "user": "u",
        "n": 2,
        "tags": ["a", "b"],
        "nested": {"k": None},
    }
    await saver.put(cfg(), _checkpoint(), md, {})
    assert (await saver.get_tuple(cfg())).metadata == md


async def test_a_non_str_channel_name_in_put_writes_is_a_clear_error(saver) -> None:
    configs = await put_chain(saver, 1)
    with pytest.raises(SerializationError, match="channel name must be a str, got int 5"):
        await saver.put_writes(configs[0], [(5, "x")], "task")
    assert (await saver.get_tuple(configs[0])).pending_writes == []


@pytest.mark.parametrize("key", ["user id", "org:team", "a.b", "ü", "$x", "a[0]"])
async def test_filter_keys_with_spaces_colons_and_dots(saver, key) -> None:
    await put_chain(saver, 1, thread="a", **{key: 1})
    await put_chain(saver, 1, thread="b", **{key: 2})
    found = await saver.list(None, filter={key: 1})
    assert [t.config["configurable"]["thread_id"] for t in found] == ["a"]


@pytest.mark.parametrize("key", ['a"b', "a\\b", "x\ty", "", 3])
async def test_filter_keys_a_json_path_cannot_name_are_refused(saver, key) -> None:
    with pytest.raises(ConfigError, match="invalid metadata filter key"):
        await saver.list(None, filter={key: 1})


def _checkpoint() -> dict:
    from tests.savers.test_basic import checkpoint

    return checkpoint({}, {})


async def test_legacy_writes_metadata_keeps_its_values_as_text(saver) -> None:
    """LangGraph < 0.3 put node outputs under metadata ``writes``; imported, it is
    display-only: what JSON cannot hold is kept as text (NaN too: stored as
    JSON, it broke every metadata filter of the saver)."""
    md = {"source": "loop", "step": 1, "writes": {"n": {"x": float("nan"), "y": 1.5}}}
    await saver.put(cfg(), _checkpoint(), md, {})
    assert (await saver.get_tuple(cfg())).metadata["writes"] == {"n": {"x": "nan", "y": 1.5}}
    assert len(await saver.list(None, filter={"source": "loop"})) == 1


def test_a_run_with_nan_in_config_metadata_leaves_it_out() -> None:
    from threadloom.checkpoint.memory import InMemorySaver
    from threadloom.graph import START, StateGraph

    b = StateGraph(dict)
    b.add_node("a", lambda s: {})
    b.add_edge(START, "a")
    saver = InMemorySaver()
    graph = b.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}, "metadata": {"score": float("nan"), "n": 1.5}}
    graph.invoke({}, config)
    assert all("score" not in t.metadata and t.metadata["n"] == 1.5 for t in saver.list(config))


def test_a_lone_surrogate_in_config_metadata_is_stored_replaced() -> None:
    """No UTF-8 store holds one: the run failed saving it (UnicodeEncodeError)."""
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.graph import START, StateGraph

    b = StateGraph(dict)
    b.add_node("a", lambda s: {})
    b.add_edge(START, "a")
    with SqliteSaver.from_conn_string(":memory:") as saver:
        config = {"configurable": {"thread_id": "t"}, "metadata": {"s": "a\ud800b"}}
        b.compile(checkpointer=saver).invoke({}, config)
        assert {t.metadata["s"] for t in saver.list(config)} == {"a\ufffdb"}

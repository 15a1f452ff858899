"""Recipes (storage/tuples.py): a re-read of an unchanged checkpoint is served
from what the last read fetched, yet equals a cold read, hands out fresh
objects, and never hides a change made by this saver or by another process."""

from __future__ import annotations

from typing import Any

import pytest

from tests.storage.test_read_cache import CountingExecutor
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _put(saver: Any, values: dict[str, Any], version: str, cid: str | None = None) -> str:
    checkpoint = empty_checkpoint()
    if cid is not None:
        checkpoint["id"] = cid
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict.fromkeys(values, version)
    checkpoint["versions_seen"] = {"node": dict.fromkeys(values, version)}
    checkpoint["updated_channels"] = sorted(values)
    checkpoint["custom"] = {"extra": [1, 2]}  # a non-standard key (the record's extra)
    saver.put(_config("t"), checkpoint, {"step": 1}, dict.fromkeys(values, version))
    return checkpoint["id"]


VALUES = {
    "small": 3,
    "big": {"text": "x" * 500, "n": 1},
    "log": ["m" * 100, "n" * 100],
    "mixed": {"messages": ["a" * 100], "k": "v"},  # a dict holding a list: stored by field
}


def _plain(tup: Any) -> tuple[Any, ...]:
    return (tup.config, tup.checkpoint, tup.metadata, tup.parent_config, tup.pending_writes)


def test_served_recipe_equals_a_cold_read() -> None:
    saver = InMemorySaver()
    cid = _put(saver, VALUES, "1.0.8147236863931789")
    saver.put_writes(_config("t", cid), [("big", {"w": "y" * 300}), ("log", ["z" * 90])], "task")
    first = saver.get_tuple(_config("t"))
    assert len(saver.codec.recipes) == 0  # a dict value decoded by field is never shared
    plain = {k: v for k, v in VALUES.items() if k != "mixed"}
    cid = _put(saver, plain, "2.0.8147236863931789")
    saver.put_writes(_config("t", cid), [("big", {"w": "y" * 300}), ("log", ["z" * 90])], "task")
    cold = saver.get_tuple(_config("t"))
    assert len(saver.codec.recipes) == 1
    counting = CountingExecutor(saver.executor)
    saver.executor = counting  # type: ignore[assignment]
    again = saver.get_tuple(_config("t"))
    assert counting.seen == ["GetCheckpoint", "LoadWrites"]
    assert _plain(again) == _plain(cold) and first.checkpoint["custom"] == {"extra": [1, 2]}
    listed = list(saver.list(_config("t")))
    assert _plain(listed[0]) == _plain(cold)


@pytest.mark.parametrize(
    "where", ["value", "list", "write", "extra", "versions", "seen", "updated"]
)
def test_served_values_are_fresh_objects(where: str) -> None:
    saver = InMemorySaver()
    cid = _put(saver, {k: v for k, v in VALUES.items() if k != "mixed"}, "1.0.814723686393")
    saver.put_writes(_config("t", cid), [("log", ["z" * 90])], "task")
    tup = saver.get_tuple(_config("t"))
    for _ in range(2):  # the second read is served from the recipe
        if where == "value":
            tup.checkpoint["channel_values"]["big"]["n"] = 99
        elif where == "list":
            tup.checkpoint["channel_values"]["log"].append("changed")
        elif where == "write":
            tup.pending_writes[0][2].append("changed")
        elif where == "extra":
            tup.checkpoint["custom"]["extra"].append(3)
        elif where == "versions":
            tup.checkpoint["channel_versions"]["big"] = "mutated"
        elif where == "seen":
            tup.checkpoint["versions_seen"]["node"]["big"] = "mutated"
        else:
            tup.checkpoint["updated_channels"].append("mutated")
        tup = saver.get_tuple(_config("t"))
        assert tup.checkpoint["channel_values"]["big"]["n"] == 1
        assert tup.checkpoint["channel_values"]["log"] == ["m" * 100, "n" * 100]
        assert tup.pending_writes[0][2] == ["z" * 90]
        assert tup.checkpoint["custom"] == {"extra": [1, 2]}
        assert tup.checkpoint["channel_versions"]["big"] == "1.0.814723686393"
        assert tup.checkpoint["versions_seen"]["node"]["big"] == "1.0.814723686393"
        assert tup.checkpoint["updated_channels"] == ["big", "log", "small"]


def test_new_writes_and_retention_are_seen() -> None:
    saver = InMemorySaver()
    cid = _put(saver, {"big": "x" * 300}, "1.0.8147236863931789")
    assert saver.get_tuple(_config("t")).pending_writes == []
    saver.put_writes(_config("t", cid), [("big", "w" * 300)], "task")
    assert saver.get_tuple(_config("t")).pending_writes == [("task", "big", "w" * 300)]
    assert len(saver.codec.recipes) == 1
    saver.delete_thread("t")
    assert len(saver.codec.recipes) == 0 and saver.get_tuple(_config("t")) is None


def test_a_hit_remembers_the_list_for_the_next_delta() -> None:
    saver = InMemorySaver()
    _put(saver, {"log": ["m" * 100]}, "1.0.8147236863931789")
    list(saver.list(_config("t")))  # a listing records no list state: get_tuple must
    saver.codec.lists.clear()
    saver.get_tuple(_config("t"))
    assert len(saver.codec.lists) == 1
    saver.codec.lists.clear()
    counting = CountingExecutor(saver.executor)
    saver.executor = counting  # type: ignore[assignment]
    saver.get_tuple(_config("t"))
    assert counting.seen == ["GetCheckpoint", "LoadWrites"] and len(saver.codec.lists) == 1


@pytest.mark.parametrize("version", ["1", f"{1:032}.0.8147236863931789"])
def test_another_process_rewriting_the_checkpoint_is_seen(tmp_path, version: str) -> None:
    path = str(tmp_path / "r.db")
    with SqliteSaver.from_conn_string(path) as reader, SqliteSaver.from_conn_string(path) as writer:
        cid = _put(writer, {"big": "OLD " * 100}, version)
        assert reader.get_tuple(_config("t")).checkpoint["channel_values"]["big"] == "OLD " * 100
        assert len(reader.codec.recipes) == (0 if version == "1" else 1)
        writer.put_writes(_config("t", cid), [("big", "w" * 300)], "task")
        assert reader.get_tuple(_config("t")).pending_writes == [("task", "big", "w" * 300)]
        if version == "1":  # deterministic versions: the same keys may name new values
            writer.delete_thread("t")
            _put(writer, {"keep": "OLD " * 100}, version)  # the old blob stays alive
            _put(writer, {"big": "NEW " * 100}, version, cid)
            got = reader.get_tuple(_config("t", cid))
            assert got.checkpoint["channel_values"]["big"] == "NEW " * 100


def test_a_listed_checkpoint_without_lists_serves_get_tuple() -> None:
    saver = InMemorySaver()
    _put(saver, {"big": "x" * 300}, "1.0.8147236863931789")
    list(saver.list(_config("t")))
    counting = CountingExecutor(saver.executor)
    saver.executor = counting  # type: ignore[assignment]
    assert saver.get_tuple(_config("t")).checkpoint["channel_values"]["big"] == "x" * 300
    assert counting.seen == ["GetCheckpoint", "LoadWrites"]

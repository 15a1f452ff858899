"""put / get_tuple / list / put_writes semantics, on every backend and both APIs."""

from __future__ import annotations

import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.constants import ERROR, INTERRUPT, RESUME
from threadloom.errors import ConfigError


def cfg(thread: str = "t", ns: str = "", cid: str | None = None) -> dict:
    conf = {"thread_id": thread, "checkpoint_ns": ns}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def checkpoint(values: dict, versions: dict, seen: dict | None = None) -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=1))
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    cp["versions_seen"] = seen or {}
    return cp


async def put_chain(saver, n: int, thread: str = "t", ns: str = "", **meta) -> list[dict]:
    configs, parent = [], cfg(thread, ns)
    for i in range(n):
        cp = checkpoint({"x": i}, {"x": f"{i + 1:032}.0.5"})
        parent = await saver.put(
            parent, cp, {"source": "loop", "step": i, **meta}, {"x": f"{i + 1:032}.0.5"}
        )
        configs.append(parent)
    return configs


async def test_roundtrip_and_latest(saver) -> None:
    configs = await put_chain(saver, 3)
    latest = await saver.get_tuple(cfg())
    assert latest.config == configs[-1]
    assert latest.checkpoint["channel_values"] == {"x": 2}
    assert latest.parent_config == configs[1]
    assert latest.metadata == {"source": "loop", "step": 2}
    first = await saver.get_tuple(configs[0])
    assert first.checkpoint["channel_values"] == {"x": 0} and first.parent_config is None
    assert (await saver.get(configs[1]))["channel_values"] == {"x": 1}


async def test_unknown_checkpoint_and_thread(saver) -> None:
    await put_chain(saver, 1)
    assert await saver.get_tuple(cfg(cid=str(uuid6()))) is None
    assert await saver.get_tuple(cfg("nobody")) is None
    with pytest.raises(ConfigError):
        await saver.get_tuple({"configurable": {}})
    with pytest.raises(ConfigError):
        await saver.put({"configurable": {}}, checkpoint({}, {}), {}, {})


async def test_checkpoint_fields_roundtrip_exactly(saver) -> None:
    versions = {"a": "00000000000000000000000000000003.0.4567", "b": 7, "c": "odd-version"}
    seen = {"node": {"a": "00000000000000000000000000000002.0.1", "b": 6}, "__input__": {}}
    cp = checkpoint({"a": [1, 2], "b": {"k": "v"}, "c": None}, versions, seen)
    cp["updated_channels"] = ["a", "b"]
    stored = await saver.put(cfg(), cp, {"source": "input", "step": -1, "parents": {}}, versions)
    got = (await saver.get_tuple(stored)).checkpoint
    assert got == cp


async def test_unchanged_channels_carry_over(saver) -> None:
    v1, v2 = {"a": 1, "big": 1}, {"a": 2, "big": 1}
    big = "x" * 500
    c1 = await saver.put(cfg(), checkpoint({"a": "one", "big": big}, v1), {}, v1)
    c2 = await saver.put(c1, checkpoint({"a": "two"}, v2), {}, {"a": 2})
    assert (await saver.get_tuple(c2)).checkpoint["channel_values"] == {"a": "two", "big": big}
    assert (await saver.get_tuple(c1)).checkpoint["channel_values"] == {"a": "one", "big": big}


async def test_namespaces_are_separate(saver) -> None:
    await put_chain(saver, 2, ns="")
    child = await put_chain(saver, 1, ns="sub:1")
    assert (await saver.get_tuple(cfg(ns="sub:1"))).config == child[0]
    assert len(await saver.list(cfg(ns=""))) == 2
    assert len(await saver.list({"configurable": {"thread_id": "t"}})) == 3


async def test_list_order_before_limit_filter(saver) -> None:
    configs = await put_chain(saver, 5)
    await put_chain(saver, 2, thread="other", owner="bob")
    ids = [c["configurable"]["checkpoint_id"] for c in configs]
    listed = [t.config["configurable"]["checkpoint_id"] for t in await saver.list(cfg())]
    assert listed == ids[::-1]
    assert [t.config for t in await saver.list(cfg(), limit=2)] == configs[:-3:-1]
    before = await saver.list(cfg(), before=configs[2])
    assert [t.config for t in before] == [configs[1], configs[0]]
    assert [t.metadata["step"] for t in await saver.list(cfg(), filter={"step": 3})] == [3]
    assert len(await saver.list(None)) == 7
    assert len(await saver.list(None, filter={"owner": "bob"})) == 2
    assert await saver.list(None, filter={"owner": "eve"}) == []
    assert len(await saver.list(cfg(cid=ids[1]))) == 1


async def test_filter_keys_are_validated(saver) -> None:
    await put_chain(saver, 1)
    for bad in ('a" OR 1=1 --', "a\\b", ""):
        with pytest.raises(ConfigError):
            await saver.list(None, filter={bad: 1})
    for odd in ("a') OR 1=1 --", "a b", "$.x"):  # literal keys, bound: they match nothing
        assert await saver.list(None, filter={odd: 1}) == []
    # values are bound, never interpolated
    assert await saver.list(None, filter={"source": "x' OR '1'='1"}) == []


async def test_metadata_roundtrip_and_config_metadata(saver) -> None:
    config = cfg()
    config["metadata"] = {"user": "ann", "score": 1.5, "ok": True, "skip": {"nested": 1}}
    config["configurable"]["api_key"] = "secret"
    stored = await saver.put(
        config, checkpoint({}, {}), {"source": "input", "step": -1, "parents": {"": "p"}}, {}
    )
    md = (await saver.get_tuple(stored)).metadata
    assert md == {
        "source": "input",
        "step": -1,
        "parents": {"": "p"},
        "user": "ann",
        "score": 1.5,
        "ok": True,
    }
    assert len(await saver.list(None, filter={"ok": True})) == 1
    assert len(await saver.list(None, filter={"score": 1.5})) == 1
    assert await saver.list(None, filter={"ok": 1.5}) == []


async def test_filter_on_none_matches_missing_keys(saver) -> None:
    """``filter={"k": None}`` matches metadata with ``k`` null or absent, as
    LangGraph's in-memory and SQLite savers do (it used to need ``k`` present);
    ``True`` is still not ``1`` (session 9)."""
    base = cfg()
    for md in ({"k": None}, {}, {"k": 1}, {"k": True}):
        await saver.put(base, checkpoint({}, {}), {"source": "loop", "step": 0, **md}, {})
    assert len(await saver.list(None, filter={"k": None})) == 2
    assert len(await saver.list(None, filter={"k": 1})) == 1
    assert len(await saver.list(None, filter={"k": True})) == 1
    assert len(await saver.list(None, filter={"k": None, "source": "loop"})) == 2
    assert len(await saver.list(base, filter={"k": None}, limit=1)) == 1


async def test_pending_writes_semantics(saver) -> None:
    (c1,) = await put_chain(saver, 1)
    await saver.put_writes(c1, [("a", 1), ("b", 2)], "task-b", "~path, b")
    await saver.put_writes(c1, [("a", 99)], "task-b", "~path, b")  # first write wins
    await saver.put_writes(c1, [("c", 3)], "task-a", "~path, a")
    await saver.put_writes(c1, [(ERROR, "boom")], "task-a", "~path, a")
    await saver.put_writes(c1, [(ERROR, "boom2")], "task-a", "~path, a")  # special: replaces
    await saver.put_writes(c1, [(INTERRUPT, ["q"]), (RESUME, ["r"])], "task-c", "~path, c")
    await saver.put_writes(c1, [("big", "y" * 1000)], "task-d", "~path, d")
    writes = (await saver.get_tuple(c1)).pending_writes
    assert writes == [
        ("task-a", ERROR, "boom2"),
        ("task-a", "c", 3),
        ("task-b", "a", 1),
        ("task-b", "b", 2),
        ("task-c", RESUME, ["r"]),
        ("task-c", INTERRUPT, ["q"]),
        ("task-d", "big", "y" * 1000),
    ]
    (c2,) = await put_chain(saver, 1, thread="t2")
    assert (await saver.get_tuple(c2)).pending_writes == []


async def test_put_writes_needs_checkpoint_id(saver) -> None:
    with pytest.raises(ConfigError):
        await saver.put_writes(cfg(), [("a", 1)], "task")


async def test_stored_values_do_not_follow_later_mutation(saver) -> None:
    items = [{"n": i, "pad": "p" * 80} for i in range(5)]
    versions = {"l": "1", "d": "1"}
    doc = {"body": "b" * 200, "tags": ["a"]}
    stored = await saver.put(cfg(), checkpoint({"l": items, "d": doc}, versions), {}, versions)
    items[0]["n"] = "mutated"
    items.append({"n": "late"})
    doc["tags"].append("late")
    values = (await saver.get_tuple(stored)).checkpoint["channel_values"]
    assert values["l"][0]["n"] == 0 and len(values["l"]) == 5
    assert values["d"]["tags"] == ["a"]

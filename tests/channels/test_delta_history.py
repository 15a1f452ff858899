"""``get_delta_channel_history`` on every saver backend, sync and async API.

The chains are shaped like what LangGraph's ``DeltaChannel`` leaves (and what
``import_langgraph`` brings over): a value stored at a snapshot, nothing stored
at the checkpoints after it, the channel's writes on each checkpoint.
"""

from __future__ import annotations

import pytest

from tests.savers.conftest import saver  # noqa: F401  (the every-backend fixture)
from tests.savers.test_basic import cfg, checkpoint
from threadloom.checkpoint.base import uuid6
from threadloom.errors import StorageError


def _v(i: int) -> str:
    return f"{i:032}.0.5"


async def _put(saver, parent: dict, values: dict, versions: dict, step: int) -> dict:  # noqa: F811
    cp = checkpoint(values, versions)
    new = {k: v for k, v in versions.items() if k in values}
    return await saver.put(parent, cp, {"source": "loop", "step": step}, new)


async def _history(saver, config: dict, channels: list[str]) -> dict:  # noqa: F811
    return await saver._call("get_delta_channel_history", config=config, channels=channels)


async def _chain(saver) -> list[dict]:  # noqa: F811
    """c0 holds items=["s"]; c1, c2 hold nothing for it (versions only)."""
    c0 = await _put(saver, cfg(), {"items": ["s"], "n": 0}, {"items": _v(1), "n": _v(1)}, 0)
    # two tasks of one step, stored out of path order: replayed in path order
    await saver.put_writes(c0, [("items", ["b1"]), ("n", 1)], "task-b", "~b")
    await saver.put_writes(c0, [("items", "a1"), ("other", 1)], "task-a", "~a")
    c1 = await _put(saver, c0, {"n": 1}, {"items": _v(2), "n": _v(2), "other": _v(2)}, 1)
    await saver.put_writes(c1, [("items", ["c"]), ("other", 2)], "task-c", "~c")
    c2 = await _put(saver, c1, {"n": 2}, {"items": _v(3), "n": _v(3), "other": _v(3)}, 2)
    await saver.put_writes(c2, [("items", ["pending"])], "task-d", "~d")  # the next step's
    return [c0, c1, c2]


async def test_seed_and_writes_in_order(saver) -> None:  # noqa: F811
    c0, c1, c2 = await _chain(saver)
    got = await _history(saver, c2, ["items", "other"])
    assert got["items"]["seed"] == ["s"]
    assert [w[1:] for w in got["items"]["writes"]] == [("items", "a1"), ("items", ["b1"])] + [
        ("items", ["c"])
    ]
    assert [w[0] for w in got["items"]["writes"]] == ["task-a", "task-b", "task-c"]
    assert "seed" not in got["other"]  # reached the root: start empty
    assert [w[2] for w in got["other"]["writes"]] == [1, 2]
    at_c1 = await _history(saver, c1, ["items"])
    assert at_c1["items"]["seed"] == ["s"] and len(at_c1["items"]["writes"]) == 2
    assert await _history(saver, c2, []) == {}


async def test_fork_sees_only_its_own_ancestors(saver) -> None:  # noqa: F811
    c0, c1, _ = await _chain(saver)
    fork = await _put(saver, c0, {"n": 9}, {"items": _v(4), "n": _v(4)}, 1)
    await saver.put_writes(fork, [("items", ["f"])], "task-f", "~f")
    tip = await _put(saver, fork, {"n": 10}, {"items": _v(5), "n": _v(5)}, 2)
    got = await _history(saver, tip, ["items"])
    assert got["items"]["seed"] == ["s"]
    assert [w[2] for w in got["items"]["writes"]] == ["a1", ["b1"], ["f"]]


async def test_a_missing_ancestor_is_an_error_not_an_empty_value(saver) -> None:  # noqa: F811
    gone = cfg(cid=str(uuid6(clock_seq=1)))
    orphan = await _put(saver, gone, {"n": 1}, {"items": _v(2), "n": _v(2)}, 1)
    with pytest.raises(StorageError, match=r"thread 't'.*not stored") as info:
        await _history(saver, orphan, ["items"])
    assert "items" in str(info.value)
    with pytest.raises(StorageError, match="items"):
        await _history(saver, cfg(cid=str(uuid6(clock_seq=1))), ["items"])


async def test_a_child_stores_the_value_under_its_parents_version(saver) -> None:  # noqa: F811
    """What a run or update_state does after rebuilding a DeltaChannel value a
    LangGraph checkpoint lacks: its next checkpoint stores the value under the
    unchanged version (named in new_versions), and later reads see it there."""
    _, _, c2 = await _chain(saver)
    rebuilt = ["s", "a1", "b1", "c"]
    cp = checkpoint({"items": rebuilt, "n": 3}, {"items": _v(3), "n": _v(4), "other": _v(3)})
    c3 = await saver.put(c2, cp, {"source": "loop", "step": 3}, {"items": _v(3), "n": _v(4)})
    assert (await saver.get_tuple(c3)).checkpoint["channel_values"]["items"] == rebuilt
    assert "items" not in (await saver.get_tuple(c2)).checkpoint["channel_values"]
    got = await _history(saver, c3, ["items"])
    assert got["items"] == {"seed": ["s"], "writes": got["items"]["writes"]}  # c3's parent chain
    c4 = await _put(saver, c3, {"n": 5}, {"items": _v(3), "n": _v(5), "other": _v(3)}, 4)
    assert (await saver.get_tuple(c4)).checkpoint["channel_values"]["items"] == rebuilt
    assert (await _history(saver, c4, ["items"]))["items"] == {"seed": rebuilt, "writes": []}

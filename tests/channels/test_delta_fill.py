"""``fill_delta``: a checkpoint's missing DeltaChannel value rebuilt before its channels are made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.channels import DeltaChannel
from threadloom.channels.delta_fill import afill_delta, fill_delta, to_rebuild
from threadloom.channels.last_value import LastValue
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.memory import InMemorySaver


def extend(state: list, writes: Sequence[Any]) -> list:
    return [*state, *(x for w in writes for x in w)]


SPECS = {"items": DeltaChannel(extend), "n": LastValue(int), "gone": LastValue(int)}


class Proxy:
    """A checkpointer-shaped wrapper without get_delta_channel_history."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def get_tuple(self, config: Any) -> Any:
        return self.inner.get_tuple(config)

    async def aget_tuple(self, config: Any) -> Any:
        return await self.inner.aget_tuple(config)


def _thread(saver: Any) -> Any:
    """c0 stores items=["s"]; c1 stores nothing for it; c0's writes add ["a"], ["b"]."""
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    c0 = empty_checkpoint()
    c0["channel_values"] = {"items": ["s"], "n": 0}
    c0["channel_versions"] = {"items": "1", "n": "1"}
    at0 = saver.put(cfg, c0, {"step": 0}, {"items": "1", "n": "1"})
    saver.put_writes(at0, [("items", ["b"])], "tb", "~b")
    saver.put_writes(at0, [("items", ["a"]), ("n", 1)], "ta", "~a")
    c1 = empty_checkpoint()
    c1["channel_values"] = {"n": 1}
    c1["channel_versions"] = {"items": "2", "n": "2", "gone": "2"}
    saver.put(at0, c1, {"step": 1}, {"n": "2"})
    return saver.get_tuple(cfg)


def test_rebuilds_only_what_is_missing():
    saver = InMemorySaver()
    tup = _thread(saver)
    assert to_rebuild(SPECS, tup.checkpoint) == ["items"]  # LastValue "gone": not a reducer
    filled = fill_delta(SPECS, saver, tup)
    assert filled.checkpoint["channel_values"] == {"n": 1, "items": ["s", "a", "b"]}
    assert "items" not in tup.checkpoint["channel_values"]  # the read tuple is not changed
    assert fill_delta(SPECS, saver, filled) is filled
    assert fill_delta(SPECS, saver, None) is None


async def test_a_proxy_without_the_method_gets_the_generic_walk():
    saver = InMemorySaver()
    tup = _thread(saver)
    proxy = Proxy(saver)
    assert fill_delta(SPECS, proxy, tup).checkpoint["channel_values"]["items"] == ["s", "a", "b"]
    filled = await afill_delta(SPECS, proxy, tup)
    assert filled.checkpoint["channel_values"]["items"] == ["s", "a", "b"]

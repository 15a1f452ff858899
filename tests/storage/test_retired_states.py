"""A cached checkpoint state drops its write-only parts (table index, versions
as given) once a child is put on it; a later put from it (a fork: time travel,
``update_state`` on an older checkpoint) rebuilds them and stores the same."""

from __future__ import annotations

from typing import Any

import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import next_version, uuid6_str
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver


def _put(saver: Any, parent_cfg: dict[str, Any], prev: dict[str, Any], step: int, **values: Any):
    """A child of ``prev`` whose listed channels got new versions and values."""
    cv = dict(prev["channel_versions"])
    vals = dict(prev["channel_values"])
    for channel, value in values.items():
        cv[channel] = next_version(cv.get(channel))
        vals[channel] = value
    seen = {**prev["versions_seen"], f"node{step}": {c: cv[c] for c in values}}
    ck = {
        **prev,
        "id": uuid6_str(clock_seq=step),
        "channel_values": vals,
        "channel_versions": cv,
        "versions_seen": seen,
        "updated_channels": sorted(values),
    }
    meta = {"source": "loop", "step": step, "parents": {}}
    new_versions = {c: cv[c] for c in values}
    return saver.put(parent_cfg, ck, meta, new_versions), ck


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: Any) -> Any:
    if request.param == "memory":
        yield InMemorySaver()
    else:
        with SqliteSaver.from_conn_string(":memory:") as s:
            yield s


def test_fork_from_a_retired_state(saver: Any) -> None:
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ck0 = empty_checkpoint()
    meta0 = {"source": "input", "step": -1, "parents": {}}
    cfg0 = saver.put(cfg, ck0, meta0, {})
    cfg1, ck1 = _put(saver, cfg0, ck0, 0, a=1, b="x")
    state1 = saver.codec.states.get(("t", "", ck1["id"]))
    assert state1 is not None and state1.index is not None and state1.raw is not None
    cfg2, ck2 = _put(saver, cfg1, ck1, 1, a=2)
    assert state1.index is None and state1.raw is None  # retired: ck2 is the tip now
    cfg3, ck3 = _put(saver, cfg1, ck1, 2, b="y", c=[1, 2])  # a fork from ck1
    cfg4, ck4 = _put(saver, cfg3, ck3, 3, a=9)  # and a child of the fork
    for out, ck in ((cfg2, ck2), (cfg3, ck3), (cfg4, ck4)):
        saver.codec.forget_thread("t")  # read from storage, not the cached states
        got = saver.get_tuple(out).checkpoint
        assert got["channel_values"] == ck["channel_values"]
        assert got["channel_versions"] == ck["channel_versions"]
        assert got["versions_seen"] == ck["versions_seen"]
        assert got["updated_channels"] == ck["updated_channels"]

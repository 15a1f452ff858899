"""The checkpoint the runtime hands a saver is a snapshot: later steps never change it.

The loop keeps one working checkpoint and updates it in place each step; a put
gets copies of only the top-level version dicts (per-node ``versions_seen``
dicts and the values dict are replaced, never changed, by the loop). A saver
that keeps the object it was given (or an ``"async"`` put queued behind the
loop) must still see what the step saved.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.runtime.test_put_step import chain, fanout
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.saver import BaseCheckpointSaver
from threadloom.pregel.writes import apply_writes


class Keeper(InMemorySaver):
    """Keeps every checkpoint object it was given, with a deep copy taken at put time."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[tuple[Any, Any]] = []

    def put_step(self, writes: Any, checkpoint: Any = None) -> Any:
        if checkpoint is not None:
            self.kept.append((checkpoint[1], copy.deepcopy(checkpoint[1])))
        return super().put_step(writes, checkpoint)

    async def aput_step(self, writes: Any, checkpoint: Any = None) -> Any:
        return self.put_step(writes, checkpoint)


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("build", [lambda s: chain(5, s), lambda s: fanout(6, s)])
def test_saved_checkpoints_are_not_changed_by_later_steps(durability, build) -> None:
    saver = Keeper()
    graph = build(saver)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"log": []}, cfg, durability=durability, lease=False)
    assert len(saver.kept) >= 3
    for given, at_put in saver.kept:
        assert given == at_put
    # and each saved step's versions_seen moved on: the snapshots are not all alike
    seen = [at_put["versions_seen"] for _, at_put in saver.kept]
    assert all(a != b for a, b in zip(seen, seen[1:], strict=False))


async def test_async_driver_snapshots_are_not_changed_either() -> None:
    saver = Keeper()
    cfg = {"configurable": {"thread_id": "t"}}
    await chain(4, saver).ainvoke({"log": []}, cfg, durability="async", lease=False)
    assert len(saver.kept) == 6
    for given, at_put in saver.kept:
        assert given == at_put


class _Task:
    def __init__(self, name: str, triggers: tuple[str, ...]) -> None:
        self.name, self.triggers, self.writes, self.path = name, triggers, [], ("pull", name)


def test_apply_writes_replaces_versions_seen_entries_instead_of_changing_them() -> None:
    old_seen = {"a": 1}
    checkpoint: dict[str, Any] = {
        "channel_versions": {"a": 2, "b": 1},
        "versions_seen": {"n": old_seen},
    }
    snapshot_seen = dict(checkpoint["versions_seen"])  # what a put shares
    apply_writes(checkpoint, {}, [_Task("n", ("a",)), _Task("m", ("b",))], None, {})
    assert checkpoint["versions_seen"] == {"n": {"a": 2}, "m": {"b": 1}}
    assert old_seen == {"a": 1} and snapshot_seen == {"n": {"a": 1}}


def test_fenced_saver_asks_whether_the_saver_is_customised_once() -> None:
    from tests.runtime.test_lease_custom_saver import Audited
    from threadloom.checkpoint.lease import custom
    from threadloom.checkpoint.lease.lease import FencedSaver, Lease

    plain, audited = InMemorySaver(), Audited()
    assert FencedSaver(plain, Lease(plain, "t", "h"))._custom == (False, False)
    assert FencedSaver(audited, Lease(audited, "t", "h"))._custom == (True, True)
    assert custom.customised(plain, False) is False
    assert isinstance(plain, BaseCheckpointSaver)

"""A node keeps its sorted triggers and PULL id text (``pull_ids``) across runs;
a trigger replaced by another (same count) must not keep the old ones (review2,
session 9: wrong task triggers, versions_seen recorded for the old channel)."""

from __future__ import annotations

from threadloom.channels import LastValue
from threadloom.pregel import NodeBuilder, Pregel


def _app(node, inp):
    return Pregel(
        nodes={"n": node},
        channels={"x": LastValue(int), "z": LastValue(int), "y": LastValue(int)},
        input_channels=inp,
        output_channels="y",
    )


def test_replaced_trigger_same_count():
    node = NodeBuilder().subscribe_only("x").do(lambda v: v + 1).write_to("y").build()
    assert _app(node, "x").invoke(1) == 2  # caches pull_ids on the node: triggers ('x',)
    node.triggers[:] = ["z"]  # now subscribed to z (same count)
    node.channels = "z"
    fresh = NodeBuilder().subscribe_only("z").do(lambda v: v + 1).write_to("y").build()
    tasks_fresh = [e for e in _app(fresh, "z").stream(1, stream_mode="tasks") if "input" in e]
    tasks_reused = [e for e in _app(node, "z").stream(1, stream_mode="tasks") if "input" in e]
    assert [t["triggers"] for t in tasks_fresh] == [("z",)]
    assert [t["triggers"] for t in tasks_reused] == [("z",)]

"""What the planning caches of session 9 (issue #9) must not change: an edge's
write joins its node's ``ChannelWrite`` in the same order (a branch stays a
writer of its own after it), and a node's cached PULL task-id text follows triggers added
after the node was first planned."""

from __future__ import annotations

from typing import TypedDict

from threadloom.channels import LastValue
from threadloom.constants import PULL
from threadloom.graph.branch import BranchWriter
from threadloom.graph.state import StateGraph
from threadloom.pregel import ChannelWrite, ChannelWriteEntry, NodeBuilder, Pregel
from threadloom.pregel.checkpoint import channels_from_checkpoint
from threadloom.pregel.ids import checkpoint_id_bytes, task_id
from threadloom.pregel.tasks import prepare_next_tasks


class S(TypedDict):
    n: int


def _bump(s: S) -> dict[str, int]:
    return {"n": s["n"] + 1}


def test_edge_write_joins_the_nodes_channel_write_in_order():
    g = StateGraph(S)
    for name in ("a", "b", "c"):
        g.add_node(name, _bump)
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", lambda s: "c")
    g.add_edge("b", "c")  # edges are attached before branches: joins b's ChannelWrite
    app = g.compile()
    (only,) = app.nodes["a"].writers
    assert type(only) is ChannelWrite
    assert isinstance(only.writes[-1], ChannelWriteEntry)
    assert only.writes[-1].channel == "branch:to:b"
    kinds = [type(w) for w in app.nodes["b"].writers]
    assert kinds == [ChannelWrite, BranchWriter]
    assert app.nodes["b"].writers[0].writes[-1].channel == "branch:to:c"
    chunks = list(app.stream({"n": 0}, stream_mode="debug"))
    writes = [c["payload"]["result"] for c in chunks if c["type"] == "task_result"]
    assert writes[1] == {"n": 2}  # node a's state update, its edge write not shown
    assert app.invoke({"n": 0}) == {"n": 3}  # a, b, then c once (branch and edge)


def test_pull_task_id_follows_a_trigger_added_after_planning():
    node = NodeBuilder().subscribe_only("x").do(lambda v: v).write_to("y").build()
    app = Pregel(
        nodes={"n": node},
        channels={"x": LastValue(int), "z": LastValue(int), "y": LastValue(int)},
        input_channels="x",
        output_channels="y",
    )
    assert app.invoke(1) == 1  # plans "n": its trigger text is kept on the node
    cid = "1ef4f797-8335-6428-8001-8a1503f9b875"
    checkpoint = {
        "v": 4,
        "id": cid,
        "ts": "",
        "channel_values": {"x": 1, "z": 2},
        "channel_versions": {"x": 1, "z": 1},
        "versions_seen": {},
        "updated_channels": None,
    }

    def planned_id() -> str:
        channels = channels_from_checkpoint(app.channels, checkpoint)
        (tid,) = prepare_next_tasks(checkpoint, [], app.nodes, channels, step=3)
        return tid

    base = checkpoint_id_bytes(cid)
    assert planned_id() == task_id(base, "n", "3", "n", PULL, "x")
    node.triggers.append("z")
    assert planned_id() == task_id(base, "n", "3", "n", PULL, "x", "z")

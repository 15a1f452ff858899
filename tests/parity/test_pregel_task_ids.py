"""Task ids, task paths and interrupt ids are recomputed exactly as LangGraph does.

The ids are hashes of the checkpoint id a step starts from, so equal ids across
the two libraries are only possible when both plan the same checkpoint: here
LangGraph runs a graph, and both planners are asked for the next step's tasks of
LangGraph's own checkpoints.
"""

from __future__ import annotations

import operator

import pytest
from langgraph.channels import BinaryOperatorAggregate as LGBinop
from langgraph.channels import LastValue as LGLastValue
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import NodeBuilder as LGNodeBuilder
from langgraph.pregel import Pregel as LGPregel
from langgraph.pregel._algo import prepare_next_tasks as lg_prepare
from langgraph.pregel._algo import task_path_str as lg_task_path_str
from langgraph.pregel._checkpoint import channels_from_checkpoint as lg_channels
from langgraph.types import Send as LGSend
from langgraph.types import interrupt as lg_interrupt

from threadloom.channels import BinaryOperatorAggregate, LastValue, Topic
from threadloom.pregel import NodeBuilder, Pregel
from threadloom.pregel.checkpoint import channels_from_checkpoint
from threadloom.pregel.ids import interrupt_id, task_path_str
from threadloom.pregel.tasks import prepare_next_tasks
from threadloom.types import Send


def lg_graph():
    fan = LGNodeBuilder().subscribe_only("inp").do(lambda x: x).write_to("a", "b").build()
    from langgraph.pregel._write import ChannelWrite, ChannelWriteTupleEntry

    fan.writers.append(
        ChannelWrite(
            [
                ChannelWriteTupleEntry(
                    lambda _: [("__pregel_tasks", LGSend("w", i)) for i in range(3)]
                )
            ]
        )
    )
    return LGPregel(
        nodes={
            "fan": fan,
            "ask": LGNodeBuilder()
            .subscribe_to("a", "b")
            .do(lambda _: [lg_interrupt("?")])
            .write_to("out"),
            "w": LGNodeBuilder().do(lambda i: [i]).write_to("out"),
        },
        channels={
            "inp": LGLastValue(int),
            "a": LGLastValue(int),
            "b": LGLastValue(int),
            "out": LGBinop(list, operator.add),
        },
        input_channels="inp",
        output_channels="out",
        checkpointer=InMemorySaver(),
    )


def tl_graph():
    return Pregel(
        nodes={
            "fan": NodeBuilder().subscribe_only("inp").do(lambda x: x).write_to("a", "b"),
            "ask": NodeBuilder().subscribe_to("a", "b").do(lambda _: ["?"]).write_to("out"),
            "w": NodeBuilder().do(lambda i: [i]).write_to("out"),
        },
        channels={
            "inp": LastValue(int),
            "a": LastValue(int),
            "b": LastValue(int),
            "out": BinaryOperatorAggregate(list, operator.add),
            "__pregel_tasks": Topic(Send),
        },
        input_channels="inp",
        output_channels="out",
    )


@pytest.mark.parametrize("ns", ["", "parent:0b9f0f0e-6c4a-1bd5-5b1e-4d6c0c3a5a11"])
def test_task_ids_and_paths_match_langgraph_for_every_checkpoint(ns):
    lg = lg_graph()
    cfg = {"configurable": {"thread_id": "ids"}}
    lg.invoke(1, cfg)
    tl = tl_graph()
    history = list(lg.checkpointer.list(cfg))
    assert len(history) >= 2
    compared = 0
    for tup in history:
        cp = tup.checkpoint
        step = tup.metadata["step"] + 1
        lg_tasks = lg_prepare(
            cp,
            tup.pending_writes or [],
            lg.nodes,
            lg_channels(lg.channels, cp)[0],
            {},
            {"configurable": {"checkpoint_ns": ns}},
            step,
            step + 10,
            for_execution=False,
        )
        # our pure planner, on LangGraph's own checkpoint dict (values are plain data)
        values = {
            k: ([Send(s.node, s.arg) for s in v] if k == "__pregel_tasks" else v)
            for k, v in cp["channel_values"].items()
        }
        ours = prepare_next_tasks(
            {**cp, "channel_values": values},
            tup.pending_writes or [],
            tl.nodes,
            channels_from_checkpoint(tl.channels, {**cp, "channel_values": values}),
            step=step,
            checkpoint_ns=ns,
        )
        assert [(t.id, t.name, t.path) for t in ours.values()] == [
            (t.id, t.name, t.path) for t in lg_tasks.values()
        ]
        compared += len(ours)
    assert compared >= 4  # fan, the three Sends (PUSH) and ask (PULL, two triggers)
    # and the ids LangGraph stored its pending writes under are the ones we plan
    latest = history[0]
    step = latest.metadata["step"] + 1
    cp = latest.checkpoint
    cp = {
        **cp,
        "channel_values": {
            k: ([Send(s.node, s.arg) for s in v] if k == "__pregel_tasks" else v)
            for k, v in cp["channel_values"].items()
        },
    }
    planned = prepare_next_tasks(
        cp, [], tl.nodes, channels_from_checkpoint(tl.channels, cp), step=step
    )
    assert {t for t, _, _ in latest.pending_writes} <= set(planned)


def test_interrupt_ids_match_langgraph():
    lg = lg_graph()
    cfg = {"configurable": {"thread_id": "int"}}
    out = lg.invoke(1, cfg)
    (intr,) = out["__interrupt__"]
    tup = lg.checkpointer.get_tuple(cfg)
    task_id = next(t for t, c, _ in tup.pending_writes if c == "__interrupt__")
    assert intr.id == interrupt_id(f"ask:{task_id}")
    from langgraph.types import _interrupt_id  # type: ignore[attr-defined]

    for answered in range(3):
        assert interrupt_id("a:1|b:2", answered) == _interrupt_id("a:1|b:2", answered)


@pytest.mark.parametrize(
    "path",
    [
        ("__pregel_pull", "node"),
        ("__pregel_push", 3, False),
        ("__pregel_push", ("__pregel_pull", "x"), 2, True),
    ],
)
def test_task_path_str_matches_langgraph(path):
    assert task_path_str(path) == lg_task_path_str(path)

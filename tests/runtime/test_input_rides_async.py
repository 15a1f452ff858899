"""``ainvoke`` twin of test_input_rides.py: with durability "sync" the async
persister holds the input checkpoint for the START step's transaction too."""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.test_put_step import cfg, chain
from threadloom.checkpoint.memory import InMemorySaver


def acounting_saver() -> tuple[InMemorySaver, list[bool]]:
    saver = InMemorySaver()
    writes: list[bool] = []
    inner = saver._arun

    async def counting(flow: Any, write: bool = False) -> Any:
        writes.append(write)
        return await inner(flow, write)

    saver._arun = counting  # type: ignore[method-assign]
    return saver, writes


async def test_input_and_start_share_one_transaction():
    saver, writes = acounting_saver()
    out = await chain(2, saver).ainvoke({"log": []}, cfg("t"), durability="sync", lease=False)
    assert out == {"log": ["n0", "n1"]}
    assert writes.count(True) == 3  # input + __start__, n0, n1
    history = [h async for h in saver.alist(cfg("t"))]
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]
    assert history[-1].metadata["source"] == "input"
    assert (
        history[-2].parent_config["configurable"]["checkpoint_id"]
        == history[-1].config["configurable"]["checkpoint_id"]
    )


@pytest.mark.parametrize("durability", ["async", "exit"])
async def test_other_durabilities_keep_every_checkpoint(durability):
    saver, _ = acounting_saver()
    graph = chain(2, saver)
    out = await graph.ainvoke({"log": []}, cfg("t"), durability=durability, lease=False)
    assert out == {"log": ["n0", "n1"]}
    steps = [h.metadata["step"] for h in saver.list(cfg("t"))]
    assert steps == ([2, 1, 0, -1] if durability == "async" else [2])


@pytest.mark.parametrize("lease", [True, False])
async def test_interrupt_before_the_first_node_saves_the_input(lease):
    saver = InMemorySaver()
    graph = chain(2, saver)
    await graph.ainvoke(
        {"log": []}, cfg("i"), durability="sync", lease=lease, interrupt_before=["n0"]
    )
    state = await graph.aget_state(cfg("i"))
    assert state.next == ("n0",)
    assert [h.metadata["step"] for h in saver.list(cfg("i"))] == [0, -1]
    out = await graph.ainvoke(None, cfg("i"), durability="sync", lease=lease)
    assert out == {"log": ["n0", "n1"]}


async def test_failing_first_node_keeps_the_input_and_start():
    saver = InMemorySaver()
    with pytest.raises(ValueError, match="n0 failed"):
        await chain(2, saver, fail="n0").ainvoke({"log": []}, cfg("f"), durability="sync")
    assert [h.metadata["step"] for h in saver.list(cfg("f"))] == [0, -1]
    out = await chain(2, saver).ainvoke(None, cfg("f"), durability="sync")
    assert out == {"log": ["n0", "n1"]}


async def test_a_raw_pregel_first_step_sees_its_input_stored():
    from threadloom.channels import LastValue
    from threadloom.pregel import NodeBuilder, Pregel

    saver = InMemorySaver()
    seen: list[list[str]] = []

    def node(x: str) -> str:
        seen.append([t.metadata["source"] for t in saver.list(cfg("raw"))])
        return x + "!"

    app = Pregel(
        nodes={"a": NodeBuilder().subscribe_only("inp").do(node).write_to("out")},
        channels={"inp": LastValue(str), "out": LastValue(str)},
        input_channels="inp",
        output_channels="out",
        checkpointer=saver,
    )
    assert await app.ainvoke("precious", cfg("raw"), durability="sync") == "precious!"
    assert seen == [["input"]]
    assert [h.metadata["source"] for h in saver.list(cfg("raw"))] == ["loop", "input"]

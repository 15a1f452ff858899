"""With durability "sync", a root run's input checkpoint rides in the first step's
transaction (the internal START step, which runs no user code): one commit fewer
per run, the same history, and nothing lost when the run stops before a node.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.test_put_step import cfg, chain
from threadloom.checkpoint.memory import InMemorySaver


def counting_saver() -> tuple[InMemorySaver, list[bool]]:
    saver = InMemorySaver()
    writes: list[bool] = []
    inner = saver._run

    def counting(flow: Any, write: bool = False) -> Any:
        writes.append(write)
        return inner(flow, write)

    saver._run = counting  # type: ignore[method-assign]
    return saver, writes


def test_input_and_start_share_one_transaction():
    saver, writes = counting_saver()
    out = chain(2, saver).invoke({"log": []}, cfg("t"), durability="sync", lease=False)
    assert out == {"log": ["n0", "n1"]}
    assert writes.count(True) == 3  # input + __start__, n0, n1
    history = list(saver.list(cfg("t")))
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]
    assert history[-1].metadata["source"] == "input"
    assert (
        history[-2].parent_config["configurable"]["checkpoint_id"]
        == history[-1].config["configurable"]["checkpoint_id"]
    )


def test_async_durability_is_unchanged():
    saver, writes = counting_saver()
    out = chain(2, saver).invoke({"log": []}, cfg("t"), durability="async", lease=False)
    assert out == {"log": ["n0", "n1"]}
    assert [h.metadata["step"] for h in saver.list(cfg("t"))] == [2, 1, 0, -1]


@pytest.mark.parametrize("lease", [True, False])
def test_interrupt_before_the_first_node_saves_the_input(lease):
    saver = InMemorySaver()
    graph = chain(2, saver)
    graph.invoke({"log": []}, cfg("i"), durability="sync", lease=lease, interrupt_before=["n0"])
    state = graph.get_state(cfg("i"))
    assert state.next == ("n0",)
    assert [h.metadata["step"] for h in saver.list(cfg("i"))] == [0, -1]
    out = graph.invoke(None, cfg("i"), durability="sync", lease=lease)
    assert out == {"log": ["n0", "n1"]}


def test_failing_first_node_keeps_the_input_and_start():
    saver = InMemorySaver()
    with pytest.raises(ValueError, match="n0 failed"):
        chain(2, saver, fail="n0").invoke({"log": []}, cfg("f"), durability="sync")
    assert [h.metadata["step"] for h in saver.list(cfg("f"))] == [0, -1]
    out = chain(2, saver).invoke(None, cfg("f"), durability="sync")
    assert out == {"log": ["n0", "n1"]}


def test_a_raw_pregel_first_step_sees_its_input_stored():
    """A raw Pregel graph has no START step: its nodes read the input in the first
    step. The input checkpoint is saved before they run (a crash in that node must
    not lose the input), not held for the step's save (found in review)."""
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
    assert app.invoke("precious", cfg("raw"), durability="sync") == "precious!"
    assert seen == [["input"]]
    assert [h.metadata["source"] for h in saver.list(cfg("raw"))] == ["loop", "input"]

"""GraphInterrupt raised with a bare string is ONE interrupt (LangGraph splits it into characters)."""

from __future__ import annotations

import operator

from threadloom.channels import BinaryOperatorAggregate, LastValue
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import GraphInterrupt
from threadloom.pregel import NodeBuilder, Pregel
from threadloom.types import Interrupt


def _raise(_: object) -> None:
    raise GraphInterrupt("manual interrupt")


def _app() -> Pregel:
    foo = (
        NodeBuilder()
        .subscribe_to("foo")
        .do(lambda _: ["foo"])
        .write_to("nodes", bar=lambda _: "go")
    )
    bar = NodeBuilder().subscribe_to("bar").do(_raise).write_to("nodes")
    return Pregel(
        nodes={"foo": foo, "bar": bar},
        channels={
            "foo": LastValue(str),
            "bar": LastValue(str),
            "nodes": BinaryOperatorAggregate(list, operator.add),
        },
        checkpointer=InMemorySaver(),
        input_channels=["foo"],
        output_channels=["nodes"],
    )


def test_string_interrupt_is_one_interrupt_everywhere() -> None:
    app = _app()
    config = {"configurable": {"thread_id": "t"}}
    result = app.invoke({"foo": "x"}, config)
    assert result["__interrupt__"] == [Interrupt(value="manual interrupt")]

    state = app.get_state(config)
    assert state.interrupts == (Interrupt(value="manual interrupt"),)
    assert state.tasks[0].interrupts == (Interrupt(value="manual interrupt"),)

    updates = list(
        app.stream({"foo": "x"}, {"configurable": {"thread_id": "u"}}, stream_mode="updates")
    )
    assert {"__interrupt__": (Interrupt(value="manual interrupt"),)} in updates


def test_stored_write_keeps_langgraph_format() -> None:
    """The pending write stays the bare string, so LangGraph and the seed programs read it as before."""
    app = _app()
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"foo": "x"}, config)
    writes = app.checkpointer.get_tuple(config).pending_writes
    assert [w[1:] for w in writes if w[1] == "__interrupt__"] == [
        ("__interrupt__", "manual interrupt")
    ]

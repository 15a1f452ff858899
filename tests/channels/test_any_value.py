"""``AnyValue`` against LangGraph's: the same updates give the same values, and
a Pregel graph using it runs the same on both libraries."""

from __future__ import annotations

import importlib

import pytest

from threadloom.channels import MISSING, AnyValue
from threadloom.errors import EmptyChannelError

STEPS = [[1], [2, 2], [], [], [3], [None], []]


def _trace(channel, missing) -> list[tuple[bool, object]]:
    """(changed, value or 'empty') after each step of STEPS, then a checkpoint round trip."""
    seen = []
    for values in STEPS:
        changed = channel.update(values)
        seen.append((changed, channel.get() if channel.is_available() else "empty"))
        restored = channel.from_checkpoint(channel.checkpoint())
        stored = restored.get() if restored.is_available() else "empty"
        assert channel.checkpoint() is missing or stored == channel.get()
    return seen


def test_updates_match_langgraph():
    lg = importlib.import_module("langgraph.channels").AnyValue
    from langgraph._internal._typing import MISSING as LG_MISSING

    assert _trace(AnyValue(int, "k"), MISSING) == _trace(lg(int, "k"), LG_MISSING)


def test_empty_reads_raise_typed_error_and_copies_are_independent():
    ch = AnyValue(int)
    with pytest.raises(EmptyChannelError):
        ch.get()
    ch.update([5])
    twin = ch.from_checkpoint(ch.checkpoint())
    twin.update([6])
    assert (ch.get(), twin.get()) == (5, 6)
    assert AnyValue(int) == AnyValue(str) and AnyValue(int) != object()


@pytest.mark.parametrize("lib", ["langgraph", "threadloom"])
def test_parallel_writers_agree(lib: str):
    """Two nodes write the same value to one AnyValue channel in one step."""
    pregel = importlib.import_module(f"{lib}.pregel")
    channels = importlib.import_module(f"{lib}.channels")
    inc = pregel.NodeBuilder().subscribe_only("a").do(lambda x: x + 1)
    graph = pregel.Pregel(
        nodes={
            "one": inc.write_to("b"),
            "two": pregel.NodeBuilder().subscribe_only("a").do(lambda x: x + 1).write_to("b"),
        },
        channels={"a": channels.EphemeralValue(int), "b": channels.AnyValue(int)},
        input_channels="a",
        output_channels="b",
    )
    assert graph.invoke(1) == 2

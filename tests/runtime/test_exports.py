"""The public names of the runtime packages (LangGraph's import paths) are pinned."""

from __future__ import annotations

import threadloom.cache
import threadloom.channels
import threadloom.config
import threadloom.pregel
from threadloom.pregel._read import PregelNode as ShimNode
from threadloom.pregel._write import ChannelWrite as ShimWrite
from threadloom.pregel._write import ChannelWriteTupleEntry


def test_pregel_exports():
    assert sorted(threadloom.pregel.__all__) == [
        "ChannelWrite",
        "ChannelWriteEntry",
        "ChannelWriteTupleEntry",
        "NodeBuilder",
        "Pregel",
        "PregelNode",
    ]
    assert ShimNode is threadloom.pregel.PregelNode
    assert ShimWrite is threadloom.pregel.ChannelWrite
    assert ChannelWriteTupleEntry is threadloom.pregel.ChannelWriteTupleEntry


def test_channels_exports():
    assert sorted(threadloom.channels.__all__, key=str.lower) == [
        "AnyValue",
        "BaseChannel",
        "BinaryOperatorAggregate",
        "DeltaChannel",
        "EphemeralValue",
        "LastValue",
        "LastValueAfterFinish",
        "MISSING",
        "NamedBarrierValue",
        "NamedBarrierValueAfterFinish",
        "Topic",
        "UntrackedValue",
    ]


def test_cache_and_config_exports():
    assert sorted(threadloom.cache.__all__) == [
        "BaseCache",
        "FullKey",
        "InMemoryCache",
        "Namespace",
        "SqliteCache",
    ]
    assert sorted(threadloom.config.__all__) == ["get_config", "get_store", "get_stream_writer"]

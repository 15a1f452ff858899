"""``put_step`` serializes a value once when a task wrote the very object its
channel then holds (a ``LastValue`` channel): the checkpoint reuses the write's
bytes. Not with an encrypting serializer (equal ciphertexts would show equal
values), and what is stored reads back the same either way."""

from __future__ import annotations

from typing import Any

import pytest

from tests.serde.test_serde_codec import ToyCipher
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import next_version, uuid6_str
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.serde import MsgpackSerializer


def _counting(saver: InMemorySaver, target: Any) -> list[int]:
    """Count the serializer's calls on ``target`` (by identity)."""
    serde, calls = saver.serde, [0]
    dumps = serde.dumps_typed

    def counted(obj: Any) -> tuple[str, bytes]:
        calls[0] += obj is target
        return dumps(obj)

    serde.dumps_typed = counted  # type: ignore[method-assign]
    return calls


def _step(saver: InMemorySaver, doc: Any, count: Any) -> tuple[Any, Any]:
    """The input checkpoint, then one step whose task wrote ``doc`` and ``count``."""
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ck0 = empty_checkpoint()
    cfg0 = saver.put(cfg, ck0, {"source": "input", "step": -1, "parents": {}}, {})
    v = next_version(None)
    ck1 = {
        **ck0,
        "id": uuid6_str(clock_seq=0),
        "channel_values": {"doc": doc, "count": count},
        "channel_versions": {"doc": v, "count": v},
        "versions_seen": {"node": {}},
    }
    writes = [(cfg0, [("doc", doc), ("count", count)], "task-1", "~node")]
    meta = {"source": "loop", "step": 0, "parents": {}}
    out = saver.put_step(writes, (cfg0, ck1, meta, {"doc": v, "count": v}))
    return cfg0, out


@pytest.mark.parametrize("size", [10, 500])  # an inline value, a blob
def test_written_object_is_serialized_once(size: int) -> None:
    saver = InMemorySaver(serde=MsgpackSerializer())  # its own: _counting patches it
    doc = {"text": "x" * size}
    calls = _counting(saver, doc)
    cfg0, out = _step(saver, doc, 7)
    assert calls[0] == 1
    assert saver.get_tuple(out).checkpoint["channel_values"] == {"doc": doc, "count": 7}
    assert saver.get_tuple(cfg0).pending_writes == [("task-1", "doc", doc), ("task-1", "count", 7)]


def test_a_different_object_is_serialized_again() -> None:
    saver = InMemorySaver(serde=MsgpackSerializer())  # its own: _counting patches it
    doc = {"text": "x" * 500}
    calls = _counting(saver, doc)
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ck0 = empty_checkpoint()
    cfg0 = saver.put(cfg, ck0, {"source": "input", "step": -1, "parents": {}}, {})
    v = next_version(None)
    other = {"text": "y" * 500}  # the channel holds another object than the write
    ck1 = {**ck0, "id": uuid6_str(clock_seq=0), "channel_values": {"doc": other}}
    ck1["channel_versions"] = {"doc": v}
    writes = [(cfg0, [("doc", doc)], "task-1", "")]
    out = saver.put_step(
        writes, (cfg0, ck1, {"source": "loop", "step": 0, "parents": {}}, {"doc": v})
    )
    assert calls[0] == 1  # the write only
    assert saver.get_tuple(out).checkpoint["channel_values"] == {"doc": other}


def test_encrypting_serializer_serializes_each_time() -> None:
    saver = InMemorySaver(serde=MsgpackSerializer(cipher=ToyCipher()))
    assert not saver.codec.same_bytes
    doc = {"text": "x" * 500}
    calls = _counting(saver, doc)
    cfg0, out = _step(saver, doc, 7)
    assert calls[0] == 2
    assert saver.get_tuple(out).checkpoint["channel_values"] == {"doc": doc, "count": 7}
    assert saver.get_tuple(cfg0).pending_writes == [("task-1", "doc", doc), ("task-1", "count", 7)]

"""Every channel kind: update rules, availability, consume/finish, checkpoints."""

from __future__ import annotations

import operator

import pytest

from threadloom.channels import (
    MISSING,
    BinaryOperatorAggregate,
    EphemeralValue,
    LastValue,
    LastValueAfterFinish,
    NamedBarrierValue,
    NamedBarrierValueAfterFinish,
    Topic,
    UntrackedValue,
)
from threadloom.checkpoint.base import _MISSING_SENTINELS
from threadloom.errors import EmptyChannelError, InvalidUpdateError
from threadloom.types import Overwrite


def test_missing_marker_is_registered_for_create_checkpoint():
    assert _MISSING_SENTINELS["missing"] is MISSING


def test_last_value():
    ch = LastValue(int, key="x")
    with pytest.raises(EmptyChannelError):
        ch.get()
    assert ch.checkpoint() is MISSING and not ch.is_available()
    assert ch.update([1]) and ch.get() == 1
    assert not ch.update([])
    with pytest.raises(InvalidUpdateError, match="'x'"):
        ch.update([1, 2])
    restored = ch.from_checkpoint(ch.checkpoint())
    assert restored.get() == 1 and restored is not ch


def test_last_value_after_finish():
    ch = LastValueAfterFinish(int)
    ch.update([5])
    assert not ch.is_available() and ch.checkpoint() == (5, False)
    assert ch.finish() and ch.get() == 5
    assert ch.consume() and not ch.is_available()
    assert ch.from_checkpoint((7, True)).get() == 7


def test_binop_reduces_and_overwrites_once_per_step():
    ch = BinaryOperatorAggregate(list, operator.add)
    assert ch.get() == []
    ch.update([[1], [2]])
    assert ch.get() == [1, 2]
    ch.update([Overwrite([9]), [3]])
    assert ch.get() == [9]
    ch.update([{"__overwrite__": [0]}])
    assert ch.get() == [0]
    with pytest.raises(InvalidUpdateError):
        ch.update([Overwrite([1]), Overwrite([2])])


def test_binop_checkpoint_is_a_snapshot():
    def append_in_place(a, b):
        a.extend(b)
        return a

    ch = BinaryOperatorAggregate(list, append_in_place)
    ch.update([[1]])
    snap = ch.checkpoint()
    ch.update([[2]])
    assert snap == [1] and ch.get() == [1, 2]
    restored = ch.from_checkpoint(snap)
    restored.update([[3]])
    assert snap == [1]


def test_binop_without_constructible_type_starts_empty():
    ch = BinaryOperatorAggregate(
        int | None, operator.add
    )  # unions are not constructed (as LangGraph)
    assert not ch.is_available() and ch.checkpoint() is MISSING
    ch.update([2, 3])
    assert ch.get() == 5  # first write becomes the value, the rest are folded in


def test_topic():
    ch = Topic(str)
    assert ch.checkpoint() == [] and not ch.is_available()
    assert ch.update(["a", ["b", "c"]])
    assert ch.get() == ["a", "b", "c"]
    assert ch.update([])  # cleared: that is a change
    assert not ch.is_available()
    acc = Topic(str, accumulate=True)
    acc.update(["a"])
    snap = acc.checkpoint()
    acc.update(["b"])
    assert snap == ["a"] and acc.get() == ["a", "b"]  # LG#8748: no live list handed out


def test_ephemeral_value():
    ch = EphemeralValue(str)
    ch.update(["x"])
    assert ch.get() == "x"
    assert ch.update([]) and not ch.is_available()
    with pytest.raises(InvalidUpdateError):
        ch.update(["a", "b"])
    assert EphemeralValue(str, guard=False).update(["a", "b"])


def test_untracked_value_is_never_persisted():
    ch = UntrackedValue(str)
    ch.update(["secret"])
    assert ch.get() == "secret" and ch.checkpoint() is MISSING
    assert not ch.from_checkpoint("secret").is_available()
    assert ch.copy().get() == "secret"


def test_named_barrier():
    ch = NamedBarrierValue(str, {"a", "b"})
    ch.update(["a"])
    assert not ch.is_available()
    ch.update(["b"])
    assert ch.is_available() and ch.get() is None
    snap = ch.checkpoint()
    assert ch.consume() and not ch.is_available()
    assert snap == {"a", "b"}
    with pytest.raises(InvalidUpdateError):
        ch.update(["z"])


def test_named_barrier_after_finish():
    ch = NamedBarrierValueAfterFinish(str, {"a"})
    ch.update(["a"])
    assert not ch.is_available()
    assert ch.finish() and ch.is_available()
    assert ch.checkpoint() == ({"a"}, True)
    assert ch.consume() and not ch.is_available()
    restored = ch.from_checkpoint(({"a"}, True))
    assert restored.is_available()


def test_noop_hints_match_behaviour():
    for ch in (LastValue(int), BinaryOperatorAggregate(list, operator.add), UntrackedValue(int)):
        ch.update([[1]] if isinstance(ch, BinaryOperatorAggregate) else [1])
        assert ch.empty_update_is_noop and not ch.update([])
        assert ch.finish_is_noop and not ch.finish()
    assert not EphemeralValue(int).empty_update_is_noop
    assert not LastValueAfterFinish(int).finish_is_noop
    assert not NamedBarrierValueAfterFinish(str, {"a"}).finish_is_noop

"""``DeltaChannel`` on its own, side by side with LangGraph's (the oracle).

Each case drives both channels the same way and compares what a caller sees:
values, ``update``'s answer, errors by class, equality, copies.
"""

from __future__ import annotations

import collections.abc
import operator
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langgraph._internal._typing import MISSING as MISSING_LG
from langgraph.channels import DeltaChannel as LGDelta
from langgraph.errors import EmptyChannelError as LGEmpty
from langgraph.errors import InvalidUpdateError as LGInvalid
from langgraph.graph import StateGraph as LGStateGraph
from langgraph.types import Overwrite as LGOverwrite
from typing_extensions import NotRequired, TypedDict

from threadloom.channels import DeltaChannel
from threadloom.channels.base import MISSING
from threadloom.errors import EmptyChannelError, InvalidUpdateError
from threadloom.graph import StateGraph
from threadloom.types import Overwrite


def extend(state: list, writes: Sequence[Any]) -> list:
    out = list(state)
    for w in writes:
        out.extend(w if isinstance(w, list) else [w])
    return out


def merge(state: dict, writes: Sequence[dict]) -> dict:
    out = dict(state)
    for w in writes:
        out.update(w)
    return out


def _pair(typ: Any = None, reducer: Any = extend) -> tuple[Any, Any]:
    lg = LGDelta(reducer, typ).from_checkpoint(MISSING_LG)
    tl = DeltaChannel(reducer, typ).from_checkpoint(MISSING)
    return lg, tl


def _step(ch: Any, values: list, lib: str) -> Any:
    ow = LGOverwrite if lib == "lg" else Overwrite
    values = [ow(v.value) if isinstance(v, Overwrite) else v for v in values]
    try:
        return ("ok", ch.update(values), ch.get())
    except (LGInvalid, InvalidUpdateError):
        return ("raises", "InvalidUpdateError")


STEPS = [
    [],
    [["a"]],
    [["b"], "c"],
    [Overwrite(["x"])],
    [["y"], Overwrite(["z"]), ["w"]],
    [Overwrite(None)],
    [Overwrite(["p"]), Overwrite(["q"])],
    [{"__overwrite__": ["d"]}],
    [{"type": "__overwrite__", "value": ["e"]}, "f"],
    [["g"]],
]


def test_updates_and_overwrites_match_langgraph():
    lg, tl = _pair()
    for values in STEPS:
        assert _step(tl, values, "tl") == _step(lg, values, "lg"), values
        assert tl.get() == lg.get()


def test_batch_reducer_gets_the_whole_step():
    seen: list[list] = []

    def spy(state: list, writes: Sequence[Any]) -> list:
        seen.append(list(writes))
        return [*state, *writes]

    ch = DeltaChannel(spy).from_checkpoint(MISSING)
    assert ch.update([1, 2, 3]) is True
    assert seen == [[1, 2, 3]] and ch.get() == [1, 2, 3]


def test_empty_until_loaded_like_langgraph():
    for ch, err in ((LGDelta(extend), LGEmpty), (DeltaChannel(extend), EmptyChannelError)):
        assert ch.is_available() is False
        with pytest.raises(err):
            ch.get()
        loaded = ch.from_checkpoint(MISSING_LG if isinstance(ch, LGDelta) else MISSING)
        assert loaded.is_available() and loaded.get() == []


@pytest.mark.parametrize("bad", [0, -1])
def test_snapshot_frequency_must_be_positive(bad):
    with pytest.raises(ValueError):
        LGDelta(extend, snapshot_frequency=bad)
    with pytest.raises(ValueError, match="snapshot_frequency"):
        DeltaChannel(extend, snapshot_frequency=bad)


@pytest.mark.parametrize(
    "typ,empty",
    [
        (None, []),
        (list, []),
        (list[str], []),
        (collections.abc.Sequence, []),
        (collections.abc.MutableSequence, []),
        (collections.abc.Set, set()),
        (collections.abc.Mapping, {}),
        (dict[str, int], {}),
    ],
)
def test_value_type_like_langgraph(typ, empty):
    lg, tl = _pair(typ)
    assert tl.get() == lg.get() == empty
    assert type(tl.get()) is type(lg.get())


def test_equality_like_langgraph():
    def other(state: list, writes: Sequence[Any]) -> list:
        return state

    cases = [
        ((extend,), (extend,)),
        ((extend,), (other,)),
        ((lambda s, w: s,), (other,)),
        ((extend, None, 5), (extend, None, 5)),
        ((extend, None, 5), (extend, None, 6)),
    ]
    for a, b in cases:

        def make(cls: Any, args: tuple) -> Any:
            return cls(args[0], args[1] if len(args) > 1 else None, snapshot_frequency=args[-1])

        a_, b_ = (a + (None, 100)) if len(a) == 1 else a, (b + (None, 100)) if len(b) == 1 else b
        assert (make(DeltaChannel, a_) == make(DeltaChannel, b_)) == (
            make(LGDelta, a_) == make(LGDelta, b_)
        ), (a, b)
    assert DeltaChannel(extend) != operator.add


def test_copy_is_independent():
    ch = DeltaChannel(extend).from_checkpoint(["a"])
    ch.key = "items"
    twin = ch.copy()
    twin.update([["b"]])
    assert ch.get() == ["a"] and twin.get() == ["a", "b"] and twin.key == "items"
    assert DeltaChannel(extend).copy().is_available() is False


def test_checkpoint_is_the_value_and_a_snapshot_of_it():
    """threadloom stores the full value (docs/compatibility.md), never live state."""

    def in_place(state: list, writes: Sequence[Any]) -> list:
        state.extend(writes)
        return state

    ch = DeltaChannel(in_place).from_checkpoint(MISSING)
    ch.update([1])
    stored = ch.checkpoint()
    ch.update([2])
    assert stored == [1] and ch.checkpoint() == [1, 2]
    assert DeltaChannel(extend).checkpoint() is MISSING


def test_replay_writes_like_langgraph():
    writes = [("t1", "items", ["a"]), ("t2", "items", "b"), ("t3", "items", ["c"])]
    with_ow = [*writes[:1], ("t4", "items", LGOverwrite(["o"])), *writes[1:]]
    for batch in (writes, with_ow, [("t", "items", LGOverwrite(None))], []):
        lg = LGDelta(extend).from_checkpoint(["seed"])
        tl = DeltaChannel(extend).from_checkpoint(["seed"])
        lg.replay_writes(batch)
        tl.replay_writes(
            [(t, c, Overwrite(v.value) if isinstance(v, LGOverwrite) else v) for t, c, v in batch]
        )
        assert tl.get() == lg.get(), batch


SHARED = DeltaChannel(extend)


class One(TypedDict):
    a: Annotated[list, SHARED]


class LGKeys(TypedDict):
    a: Annotated[list[str], LGDelta(extend)]
    b: Annotated[collections.abc.Sequence[int], LGDelta(extend, snapshot_frequency=7)]
    c: Annotated[NotRequired[dict[str, int]], LGDelta(merge)]
    d: Annotated[collections.abc.Mapping[str, int], LGDelta(merge)]


class TLKeys(TypedDict):
    a: Annotated[list[str], DeltaChannel(extend)]
    b: Annotated[collections.abc.Sequence[int], DeltaChannel(extend, snapshot_frequency=7)]
    c: Annotated[NotRequired[dict[str, int]], DeltaChannel(merge)]
    d: Annotated[collections.abc.Mapping[str, int], DeltaChannel(merge)]


def _channels(cls: Any, schema: Any) -> Any:
    b = cls(schema)
    b.add_node("n", lambda s: {})
    b.add_edge("__start__", "n")
    return b.compile().channels


def test_annotated_keys_get_their_own_typed_channel():
    g1, g2 = _channels(StateGraph, One), _channels(StateGraph, One)
    assert g1["a"] is not g2["a"] and g1["a"] is not SHARED
    lg = _channels(LGStateGraph, LGKeys)
    tl = _channels(StateGraph, TLKeys)
    for key in "abcd":
        assert isinstance(tl[key], DeltaChannel)
        assert tl[key].typ is lg[key].typ, key
        assert tl[key].snapshot_frequency == lg[key].snapshot_frequency
        assert tl[key].reducer is lg[key].reducer

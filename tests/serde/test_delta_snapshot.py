"""LangGraph's ``_DeltaSnapshot`` (msgpack extension 7) read by threadloom's serializer.

A LangGraph 1.2 ``DeltaChannel`` stores its value every N updates wrapped in
``_DeltaSnapshot``; threadloom reads it as the value inside (which its
``DeltaChannel`` takes as its stored value), under the same trust rules as any
LangGraph row: nothing is imported, an unknown class inside is refused by path.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

import ormsgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.checkpoint.serde.paths import unpack_slow
from threadloom.errors import SerializationError

LG = JsonPlusSerializer()
TL = MsgpackSerializer()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.datetimes(timezones=st.just(dt.timezone.utc)),
    st.sets(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3),
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@SETTINGS
@given(values)
def test_snapshot_reads_as_the_value_inside(value):
    plain = TL.loads_typed(LG.dumps_typed(value))
    assert TL.loads_typed(LG.dumps_typed(_DeltaSnapshot(value))) == plain
    nested = TL.loads_typed(LG.dumps_typed({"items": _DeltaSnapshot(value), "n": 1}))
    assert nested == {"items": plain, "n": 1}


@SETTINGS
@given(values)
def test_slow_path_reads_it_the_same(value):
    tag, data = LG.dumps_typed({"items": _DeltaSnapshot(value)})
    if tag != "msgpack":  # LangGraph wrote something else (bytes, None): not this ext
        return
    assert unpack_slow(data, TL._unpacker) == TL.loads_typed((tag, data))


@dataclasses.dataclass
class NotAllowed:
    x: int = 0


def test_an_unknown_class_inside_is_refused_by_path(monkeypatch):
    called: list = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    tag, data = LG.dumps_typed({"items": _DeltaSnapshot([1, NotAllowed(2)])})
    with pytest.raises(SerializationError) as info:
        TL.loads_typed((tag, data))
    assert info.value.path == "items[1]"
    call = ormsgpack.Ext(0, ormsgpack.packb(["os", "system", "id"]))
    wrapped = ormsgpack.packb({"x": ormsgpack.Ext(7, ormsgpack.packb([call]))})
    with pytest.raises(SerializationError):
        TL.loads_typed(("msgpack", wrapped))
    assert called == []

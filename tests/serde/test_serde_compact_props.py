"""Property tests: models with random set / unset / default / changed fields round-trip exactly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.serde.compact_models import Color, Kitchen, Page, Sub
from threadloom.checkpoint.serde import MsgpackSerializer

messages = pytest.importorskip("langchain_core.messages")

SER = MsgpackSerializer(compress_threshold=128)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, -0.0, float("nan"), 1.5]),
    st.sampled_from(["", "d", "x"]),
    st.sampled_from([b"", b"z"]),
    st.sampled_from(list(Color)),
    st.builds(Sub, x=st.integers(0, 2)),
)
value = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2),
        st.lists(inner, max_size=2).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    ),
    max_leaves=4,
)
near_defaults = st.sampled_from(  # equal (==) to some default without being it
    [-0.0, 0.0, float("nan"), False, True, 0, 1, "", "d", b"", [], (), {}, None, Color.RED]
)
DEFAULTS = {"s": "d", "n": None, "i": 0, "f": 0.0, "b": False, "raw": b"", "color": Color.RED}
DEFAULTS |= {"lst": [], "dct": {}, "tup": (), "filled": [1, 2], "made": [7], "sub": Sub()}
GIVEN = {  # valid values to pass to the constructor (set fields)
    "s": st.sampled_from(["d", "x"]),
    "n": st.none() | st.integers(0, 2),
    "i": st.integers(-1, 1),
    "f": st.sampled_from([0.0, -0.0, 2.5]),
    "b": st.booleans(),
    "raw": st.sampled_from([b"", b"q"]),
    "color": st.sampled_from(list(Color)),
    "lst": st.lists(st.integers(0, 2), max_size=2),
    "dct": st.dictionaries(st.sampled_from(["a"]), st.integers(0, 1), max_size=1),
    "tup": st.lists(st.integers(0, 2), max_size=2).map(tuple),
    "filled": st.lists(st.integers(0, 2), max_size=2),
    "made": st.just([7]),
    "sub": st.builds(Sub, x=st.integers(0, 1)),
    "derived": st.sampled_from(["d!", "y"]),
}


def assert_same(back, model) -> None:
    """Same class, field order, fields set, extras, and per field the same type and repr."""
    assert type(back) is type(model)
    assert back.model_fields_set == model.model_fields_set
    assert list(back.__dict__) == list(model.__dict__)
    assert repr(back.__pydantic_extra__) == repr(model.__pydantic_extra__)
    for key, val in model.__dict__.items():
        assert type(back.__dict__[key]) is type(val), key
        assert repr(back.__dict__[key]) == repr(val), key


@st.composite
def kitchens(draw):
    kwargs = {"req": draw(st.integers(0, 3))}
    for name, strategy in GIVEN.items():
        choice = draw(st.sampled_from(["unset", "default", "value"]))
        if choice == "default" and name in DEFAULTS:
            kwargs[name] = DEFAULTS[name]
        elif choice == "value":
            kwargs[name] = draw(strategy)
    kwargs.update(draw(st.dictionaries(st.sampled_from(["e1", "e2"]), value, max_size=2)))
    model = Kitchen(**kwargs)
    for name in draw(st.lists(st.sampled_from(sorted(GIVEN)), max_size=3)):
        if draw(st.booleans()):  # assigned behind pydantic's back: stays unset
            object.__setattr__(model, name, draw(near_defaults | value))
        elif isinstance(getattr(model, name), list):  # changed in place
            getattr(model, name).append(draw(leaf))
    return model


@SETTINGS
@given(kitchens())
def test_models_with_random_fields_roundtrip_exactly(model):
    assert_same(SER.loads_typed(SER.dumps_typed(model)), model)


@SETTINGS
@given(st.lists(kitchens(), max_size=3), st.sampled_from([None, "c"]))
def test_generic_pages_of_models_roundtrip_exactly(items, cursor):
    page = (
        Page[Kitchen](items=items) if cursor is None else Page[Kitchen](items=items, cursor=cursor)
    )
    back = SER.loads_typed(SER.dumps_typed(page))
    assert type(back) is Page[Kitchen]
    assert back.model_fields_set == page.model_fields_set
    for got, want in zip(back.items, page.items, strict=True):
        assert_same(got, want)


text = st.text(max_size=20)
maybe = st.sampled_from([None, "x", ""])


@st.composite
def lc_messages(draw):
    kind = draw(st.sampled_from(["human", "ai", "tool", "system"]))
    kwargs = {
        "content": draw(
            text
            | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), max_size=2)
        )
    }
    for key in ("id", "name"):
        if draw(st.booleans()):
            kwargs[key] = draw(maybe)
    if draw(st.booleans()):
        kwargs["additional_kwargs"] = draw(
            st.dictionaries(st.sampled_from(["k"]), text, max_size=1)
        )
    if kind == "ai" and draw(st.booleans()):
        kwargs["tool_calls"] = [{"name": "f", "args": {"q": draw(text)}, "id": draw(text)}]
    if kind == "ai" and draw(st.booleans()):
        kwargs["usage_metadata"] = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    if kind == "tool":
        kwargs["tool_call_id"] = draw(text)
        if draw(st.booleans()):
            kwargs["status"] = draw(st.sampled_from(["success", "error"]))
    cls = {"human": messages.HumanMessage, "ai": messages.AIMessage}.get(kind)
    cls = cls or {"tool": messages.ToolMessage, "system": messages.SystemMessage}[kind]
    msg = cls(**kwargs)
    if draw(st.booleans()):
        msg.response_metadata["model"] = draw(text)  # changed in place, still unset
    return msg


@SETTINGS
@given(st.lists(lc_messages(), max_size=4))
def test_langchain_messages_roundtrip_exactly(msgs):
    back = SER.loads_typed(SER.dumps_typed(msgs))
    assert back == msgs
    for got, want in zip(back, msgs, strict=True):
        assert_same(got, want)

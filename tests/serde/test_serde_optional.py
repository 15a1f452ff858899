"""pydantic (incl. generics), numpy and langchain-core values."""

from __future__ import annotations

import typing

import pytest

from threadloom.checkpoint.serde import MsgpackSerializer, allowlist_from_annotations
from threadloom.errors import SerializationError

pydantic = pytest.importorskip("pydantic")

T = typing.TypeVar("T")


class Item(pydantic.BaseModel):
    name: str
    qty: int = 1


class Page(pydantic.BaseModel, typing.Generic[T]):
    items: list[T]
    cursor: str | None = None


class Loose(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    a: int = 0


class Checked(pydantic.BaseModel):
    n: int

    @pydantic.field_validator("n")
    @classmethod
    def _count(cls, v):
        Checked.calls += 1
        return v


Checked.calls = 0

SER = MsgpackSerializer(allowed=[Item, Page, Loose, Checked])


def roundtrip(value, ser=SER):
    return ser.loads_typed(ser.dumps_typed(value))


def test_pydantic_model_keeps_fields_set():
    item = Item(name="x")
    back = roundtrip(item)
    assert back == item and type(back) is Item
    assert back.model_fields_set == {"name"}
    assert back.model_dump(exclude_unset=True) == {"name": "x"}


@pytest.mark.parametrize(
    "value",
    [
        Page[Item](items=[Item(name="a")]),
        Page[int](items=[1, 2], cursor="c"),
        Page[typing.Optional[list[int]]](items=[None, [1]]),  # noqa: UP045
        Page[int | None](items=[None]),
        Page[typing.Literal["a", "b"]](items=["a"]),
        Page[Page[Item]](items=[Page[Item](items=[])]),
    ],
    ids=lambda v: type(v).__name__,
)
def test_generic_model_keeps_parametrized_type(value):
    back = roundtrip(value)
    assert back == value
    assert type(back).__pydantic_generic_metadata__ == type(value).__pydantic_generic_metadata__


def test_generic_with_untrusted_argument_is_refused():
    class Secret(pydantic.BaseModel):
        x: int = 0

    with pytest.raises(SerializationError) as info:
        SER.dumps_typed({"page": Page[Secret](items=[])})
    assert info.value.path == "page"


def test_extra_fields_survive():
    back = roundtrip(Loose(a=1, surprise={"k": (1, 2)}))
    assert back.surprise == {"k": (1, 2)}


def test_validators_do_not_run_on_load():
    original = Checked(n=1)
    tag_data = SER.dumps_typed(original)
    before = Checked.calls
    assert SER.loads_typed(tag_data) == original
    assert Checked.calls == before


def test_allowlist_from_annotations_collects_schema_classes():
    class State(typing.TypedDict):
        page: typing.Annotated[Page[Item], "meta"]
        maybe: dict[str, list[Loose]] | None

    found = allowlist_from_annotations(State)
    assert {Item, Page, Loose} <= found
    ser = MsgpackSerializer().with_allowlist(found)
    value = {"page": Page[Item](items=[Item(name="z")]), "maybe": {"k": [Loose()]}}
    assert roundtrip(value, ser) == value


def test_numpy_arrays_and_scalars():
    np = pytest.importorskip("numpy")
    ser = MsgpackSerializer()
    for arr in (
        np.arange(12, dtype=np.int16).reshape(3, 4),
        np.arange(6.0)[::2],  # non-contiguous view
        np.array(["a", "bc"]),
        np.array([1 + 2j], dtype=np.complex64),
        np.zeros((0, 3)),
        np.array(["2024-01-01"], dtype="datetime64[D]"),
    ):
        back = roundtrip({"a": arr}, ser)["a"]
        assert back.dtype == arr.dtype and back.shape == arr.shape
        assert np.array_equal(back, arr)
        assert back.flags.writeable
    for scalar in (np.float32(1.5), np.int64(-3), np.bool_(True)):
        back = roundtrip(scalar, ser)
        assert type(back) is type(scalar) and back == scalar


@pytest.mark.parametrize("dtype", ["object", [("a", "i4"), ("b", "f8")]])
def test_numpy_object_and_structured_dtypes_are_refused(dtype):
    np = pytest.importorskip("numpy")
    with pytest.raises(SerializationError, match="cannot be stored safely") as info:
        MsgpackSerializer().dumps_typed({"arrays": [np.zeros(2, dtype=dtype)]})
    assert info.value.path == "arrays[0]"


def test_numpy_object_dtype_is_refused_on_load():
    np = pytest.importorskip("numpy")
    import ormsgpack

    state = ["|O", [1], b"\x00" * 8]
    body = ormsgpack.packb(["numpy.ndarray", state])
    data = ormsgpack.packb({"x": ormsgpack.Ext(33, body)})
    with pytest.raises(SerializationError, match="cannot be stored safely"):
        MsgpackSerializer().loads_typed(("msgpack", data))
    assert np  # numpy present: the refusal came from the dtype check


def test_langchain_messages():
    messages = pytest.importorskip("langchain_core.messages")
    ser = MsgpackSerializer()
    value = {
        "messages": [
            messages.HumanMessage("hi", id="1"),
            messages.AIMessage(
                "", id="2", tool_calls=[{"name": "t", "args": {"a": 1}, "id": "c1"}]
            ),
            messages.ToolMessage("done", tool_call_id="c1", id="3"),
            messages.SystemMessage("sys"),
            messages.AIMessageChunk("par", id="4"),
            messages.RemoveMessage(id="1"),
        ]
    }
    back = roundtrip(value, ser)
    assert back == value
    assert [type(m) for m in back["messages"]] == [type(m) for m in value["messages"]]
    assert back["messages"][1].tool_calls[0]["args"] == {"a": 1}


class WithPrivate(pydantic.BaseModel):
    n: int = 0
    _cache: dict = pydantic.PrivateAttr(default_factory=dict)


def test_private_attributes_get_their_defaults():
    ser = MsgpackSerializer(allowed=[WithPrivate])
    obj = WithPrivate(n=2)
    obj._cache["x"] = 1  # private state is not stored
    back = ser.loads_typed(ser.dumps_typed(obj))
    assert back.n == 2 and back._cache == {}
    assert back.model_fields_set == {"n"}


def test_revived_model_behaves_like_constructed():
    back = roundtrip(Item(name="a"))
    back.qty = 5  # assignment still works and marks the field set
    assert back.model_fields_set == {"name", "qty"}
    assert back.model_dump() == {"name": "a", "qty": 5}
    assert back.model_copy(update={"name": "b"}).name == "b"

"""The compact pydantic layout and class aliases: exact bytes, legacy payloads, security.

LEGACY holds payloads written by the previous encoder (every field plus the
names of all unset fields, full dotted class names); they must decode forever.
"""

from __future__ import annotations

import subprocess
import sys

import ormsgpack
import pytest

from tests.serde.compact_models import (
    Aliased,
    Cached,
    Color,
    Ints,
    Item,
    Kitchen,
    Page,
    Private,
    Score,
    Sub,
)
from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.checkpoint.serde.aliases import ALIASES, WIRE_NAMES
from threadloom.checkpoint.serde.registry import Registry
from threadloom.errors import SerializationError

messages = pytest.importorskip("langchain_core.messages")

SER = MsgpackSerializer(compress_threshold=None)

LEGACY = {
    "human": (
        "c7b62192d92a6c616e67636861696e5f636f72652e6d657373616765732e68756d616e2e48756d616e4d6573"
        "7361676587a7636f6e74656e74a86869207468657265b16164646974696f6e616c5f6b776172677380b17265"
        "73706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a3682d31a95f5f75"
        "6e7365745f5f94b16164646974696f6e616c5f6b7761726773b1726573706f6e73655f6d65746164617461a4"
        "74797065a46e616d65"
    ),
    "ai_tools": (
        "c801232192d9246c616e67636861696e5f636f72652e6d657373616765732e61692e41494d6573736167658a"
        "a7636f6e74656e74a0b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461"
        "746180a474797065a26169a46e616d65c0a26964a3612d31aa746f6f6c5f63616c6c739184a46e616d65a673"
        "6561726368a46172677381a171a178a26964a26331a474797065a9746f6f6c5f63616c6cb2696e76616c6964"
        "5f746f6f6c5f63616c6c7390ae75736167655f6d65746164617461c0a95f5f756e7365745f5f96b161646469"
        "74696f6e616c5f6b7761726773b1726573706f6e73655f6d65746164617461a474797065a46e616d65b2696e"
        "76616c69645f746f6f6c5f63616c6c73ae75736167655f6d65746164617461"
    ),
    "tool": (
        "c7ea2192d9286c616e67636861696e5f636f72652e6d657373616765732e746f6f6c2e546f6f6c4d65737361"
        "67658aa7636f6e74656e74a6726573756c74b16164646974696f6e616c5f6b776172677380b1726573706f6e"
        "73655f6d6574616461746180a474797065a4746f6f6ca46e616d65c0a26964a3742d31ac746f6f6c5f63616c"
        "6c5f6964a26331a86172746966616374c0a6737461747573a773756363657373a95f5f756e7365745f5f96b1"
        "6164646974696f6e616c5f6b7761726773b1726573706f6e73655f6d65746164617461a474797065a46e616d"
        "65a86172746966616374a6737461747573"
    ),
    "item": (
        "c7912192b274657374732e636f6d706163742e4974656d87a46e616d65a177a371747902a47461677391a76d"
        "757461746564a46e6f7465c0a3737562c7322192b174657374732e636f6d706163742e53756283a17800a56c"
        "6162656ca173a95f5f756e7365745f5f92a178a56c6162656ca5636f6c6f72a3726564a95f5f756e7365745f"
        "5f93a474616773a46e6f7465a3737562"
    ),
    "page": (
        "c78e2192b0707964616e7469632e67656e6572696393b274657374732e636f6d706163742e5061676591b174"
        "657374732e636f6d706163742e53756283a56974656d7391c7302192b174657374732e636f6d706163742e53"
        "756283a17801a56c6162656ca173a95f5f756e7365745f5f91a56c6162656ca6637572736f72c0a95f5f756e"
        "7365745f5f91a6637572736f72"
    ),
    "kitchen": (
        "c801122192b574657374732e636f6d706163742e4b69746368656ede0011a372657101a173a178a16ec0a169"
        "00a166cb0000000000000000a162c2a3726177c400a5636f6c6f72c7172192b374657374732e636f6d706163"
        "742e436f6c6f72a172a36c73749101a364637480a3747570d42090a666696c6c6564920102a46d6164659107"
        "a3737562c7322192b174657374732e636f6d706163742e53756283a17800a56c6162656ca173a95f5f756e73"
        "65745f5f92a178a56c6162656ca764657269766564a27821ab65787472615f6669656c6405a95f5f756e7365"
        "745f5f9da16ea169a166a162a3726177a5636f6c6f72a36c7374a3646374a3747570a666696c6c6564a46d61"
        "6465a3737562a764657269766564"
    ),
}


def legacy(key: str):
    return SER.loads_typed(("msgpack", bytes.fromhex("".join(LEGACY[key]))))


def raw(data: bytes):
    """The stored structure with extensions opened: ``("ext", code, payload)``."""
    return ormsgpack.unpackb(data, ext_hook=lambda code, b: ("ext", code, raw(b)))


def roundtrip(value):
    return SER.loads_typed(SER.dumps_typed(value))


def assert_exact(back, value) -> None:
    assert type(back) is type(value)
    assert back == value
    assert back.model_fields_set == value.model_fields_set
    assert list(back.__dict__) == list(value.__dict__)
    assert back.__pydantic_extra__ == value.__pydantic_extra__


# -- payloads written by the previous encoder ---------------------------------------


def test_legacy_langchain_messages_decode():
    human = legacy("human")
    assert_exact(human, messages.HumanMessage(content="hi there", id="h-1"))
    ai = legacy("ai_tools")
    expected = messages.AIMessage(
        content="", id="a-1", tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "c1"}]
    )
    assert_exact(ai, expected)
    assert ai.tool_calls[0]["type"] == "tool_call"
    assert_exact(
        legacy("tool"), messages.ToolMessage(content="result", tool_call_id="c1", id="t-1")
    )


def test_legacy_model_with_extras_and_in_place_change_decodes():
    item = legacy("item")
    expected = Item(name="w", qty=2, color="red")
    expected.tags.append("mutated")
    assert_exact(item, expected)
    assert item.model_fields_set == {"name", "qty", "color"}
    assert item.__pydantic_extra__ == {"color": "red"}


def test_legacy_generic_and_kitchen_decode():
    page = legacy("page")
    assert type(page) is Page[Sub]
    assert_exact(page, Page[Sub](items=[Sub(x=1)]))
    kitchen = legacy("kitchen")
    expected = Kitchen(req=1, s="x", extra_field=5)
    expected.lst.append(1)
    assert_exact(kitchen, expected)
    assert kitchen.derived == "x!"


# -- the compact layout ------------------------------------------------------------


def test_message_stores_only_what_was_set_under_a_one_byte_alias():
    msg = messages.HumanMessage(content="hi there", id="h-1")
    _, data = SER.dumps_typed(msg)
    assert raw(data) == ("ext", 33, [1, {"content": "hi there", "id": "h-1"}])
    assert len(data) < len(bytes.fromhex("".join(LEGACY["human"]))) // 3
    assert_exact(roundtrip(msg), msg)


def test_document_stores_only_what_was_set_like_messages():
    """langchain-core's ``Document`` defaults are library-fixed too (``id=None``,
    ``type="Document"``): left out, as for messages (34 bytes, not 71)."""
    from langchain_core.documents import Document

    doc = Document(page_content="p", metadata={"m": 1})
    _, data = SER.dumps_typed(doc)
    assert raw(data) == ("ext", 33, [14, {"metadata": {"m": 1}, "page_content": "p"}])
    assert_exact(roundtrip(doc), doc)
    with_id = Document(page_content="p", id="d1")
    _, data = SER.dumps_typed(with_id)
    assert raw(data) == ("ext", 33, [14, {"id": "d1", "page_content": "p"}])
    assert_exact(roundtrip(with_id), with_id)


def test_ai_message_with_tool_calls_keeps_set_fields_only():
    msg = messages.AIMessage(
        content="", id="a-1", tool_calls=[{"name": "s", "args": {}, "id": "c1"}]
    )
    code, payload = raw(SER.dumps_typed(msg)[1])[1:]
    assert (code, payload[0]) == (33, WIRE_NAMES["langchain_core.messages.ai.AIMessage"])
    assert set(payload[1]) == {"content", "id", "tool_calls"}
    assert_exact(roundtrip(msg), msg)


def test_unset_field_changed_in_place_is_stored_and_marked_unset():
    msg = messages.HumanMessage(content="x")
    msg.additional_kwargs["k"] = 1  # unset, but no longer its default
    state = raw(SER.dumps_typed(msg)[1])[2][1]
    assert state == {
        "content": "x",
        "additional_kwargs": {"k": 1},
        "__unset__": ["additional_kwargs"],
    }
    back = roundtrip(msg)
    assert_exact(back, msg)
    assert "additional_kwargs" not in back.model_fields_set


def test_explicitly_set_default_is_stored_and_stays_set():
    msg = messages.HumanMessage(content="x", name=None, additional_kwargs={})
    state = raw(SER.dumps_typed(msg)[1])[2][1]
    assert state == {"content": "x", "additional_kwargs": {}, "name": None}
    assert_exact(roundtrip(msg), msg)


@pytest.mark.parametrize(
    "change",
    [
        ("f", -0.0),  # equals the default 0.0 but is not it
        ("f", float("nan")),
        ("i", False),  # equals 0, other type
        ("b", 0),
        ("s", "d"),  # same value: may be left out
        ("lst", ()),
        ("dct", {"a": 1}),
        ("tup", []),
        ("color", Color.BLUE),
        ("filled", [1, 2]),
        ("made", [7]),
        ("sub", Sub(x=1)),
        ("derived", "d!"),
    ],
)
def test_unset_field_assigned_behind_pydantics_back_roundtrips(change):
    name, value = change
    model = Kitchen(req=1)
    object.__setattr__(model, name, value)  # bypasses validation and model_fields_set
    back = roundtrip(model)
    assert_exact_kitchen(back, model)


def assert_exact_kitchen(back, model) -> None:
    assert type(back) is type(model)
    assert back.model_fields_set == model.model_fields_set
    assert list(back.__dict__) == list(model.__dict__)
    for key, value in model.__dict__.items():
        got = back.__dict__[key]
        assert type(got) is type(value), key
        assert repr(got) == repr(value), key


def test_validators_and_field_aliases_are_not_rerun_or_confused():
    model = Aliased(y=2, z=5)  # x (alias y) = 4 after the validator, y (alias z) = 5
    assert (model.x, model.y) == (4, 5)
    back = roundtrip(model)
    assert_exact(back, model)
    only_y = Aliased(z=3)
    assert_exact(roundtrip(only_y), only_y)


def test_private_attributes_are_reinitialised_like_model_construct():
    model = Private(value=2)
    model._seen.append(5)
    back = roundtrip(model)
    assert back == Private(value=2) and back.model_fields_set == {"value"}
    assert back._seen == [1]


def test_cached_property_and_root_model_roundtrip():
    model = Cached()
    assert model.double == 6  # writes into __dict__
    back = roundtrip(model)
    assert back.value == 3 and back.model_fields_set == set() and back.double == 6
    ints = Ints([1, 2])
    assert_exact(roundtrip(ints), ints)


def test_root_model_with_unset_default_root_roundtrips():
    # pydantic revives a root model only when given its root: an unset default is stored
    for score in (Score(), Score(7), Score(5)):
        assert_exact(roundtrip(score), score)
    assert Score().model_fields_set == set() and roundtrip(Score()).model_fields_set == set()


def test_missing_fields_take_defaults_and_extras_follow_the_class():
    back = SER.loads_typed(SER.dumps_typed(Item(name="a", colour="x")))
    assert back.tags == [] and back.sub == Sub() and back.__pydantic_extra__ == {"colour": "x"}
    assert back.model_fields_set == {"name", "colour"}


# -- aliases -------------------------------------------------------------------------

FROZEN_ALIASES = {
    1: "langchain_core.messages.human.HumanMessage",
    2: "langchain_core.messages.ai.AIMessage",
    3: "langchain_core.messages.tool.ToolMessage",
    4: "langchain_core.messages.system.SystemMessage",
    5: "langchain_core.messages.ai.AIMessageChunk",
    6: "langchain_core.messages.human.HumanMessageChunk",
    7: "langchain_core.messages.tool.ToolMessageChunk",
    8: "langchain_core.messages.system.SystemMessageChunk",
    9: "langchain_core.messages.chat.ChatMessage",
    10: "langchain_core.messages.chat.ChatMessageChunk",
    11: "langchain_core.messages.function.FunctionMessage",
    12: "langchain_core.messages.function.FunctionMessageChunk",
    13: "langchain_core.messages.modifier.RemoveMessage",
    14: "langchain_core.documents.base.Document",
    15: "threadloom.Send",
    16: "threadloom.Interrupt",
    17: "threadloom.Command",
    18: "threadloom.Overwrite",
    19: "threadloom.RemoveMessage",
}


def test_alias_table_is_append_only():
    """Stored rows depend on these numbers: entries may be added, never changed."""
    for number, name in FROZEN_ALIASES.items():
        assert ALIASES[number] == name
    assert sorted(ALIASES) == list(range(1, len(ALIASES) + 1))
    assert len(set(ALIASES.values())) == len(ALIASES)


def test_an_alias_grants_no_trust():
    """An alias is only a registry name: a serializer whose registry lacks it refuses it."""
    data = SER.dumps_typed(messages.HumanMessage(content="x"))
    bare = MsgpackSerializer(registry=Registry())
    with pytest.raises(SerializationError, match="HumanMessage"):
        bare.loads_typed(data)
    raw_reader = MsgpackSerializer(registry=Registry(), on_unknown="raw")
    unknown = raw_reader.loads_typed(data)
    assert unknown.type_name == "langchain_core.messages.human.HumanMessage"


def test_unknown_alias_number_is_refused():
    data = ormsgpack.packb(ormsgpack.Ext(33, ormsgpack.packb([999, {}])))
    with pytest.raises(SerializationError, match="alias #999"):
        SER.loads_typed(("msgpack", data))


def test_aliased_rows_decode_in_a_fresh_process():
    """The alias resolves through the lazy langchain-core registration, nothing imported first."""
    data = SER.dumps_typed(messages.AIMessage(content="hey", id="a"))[1].hex()
    code = (
        "from threadloom.checkpoint.serde import MsgpackSerializer\n"
        f"m = MsgpackSerializer().loads_typed(('msgpack', bytes.fromhex('{data}')))\n"
        "print(type(m).__name__, m.content, sorted(m.model_fields_set))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["AIMessage", "hey", "['content',", "'id']"]


def test_extra_field_named_like_the_marker_is_refused():
    with pytest.raises(SerializationError, match="__unset__"):
        SER.dumps_typed(Item(name="a", __unset__=["name"]))


def alias_samples() -> list:
    from langchain_core.documents import Document

    from threadloom.graph.message import RemoveMessage
    from threadloom.types import Command, Interrupt, Overwrite, Send

    m = messages
    return [
        m.HumanMessage(content="h"),
        m.AIMessage(content="a", id="1"),
        m.ToolMessage(content="t", tool_call_id="c"),
        m.SystemMessage(content="s"),
        m.AIMessageChunk(content="a"),
        m.HumanMessageChunk(content="h"),
        m.ToolMessageChunk(content="t", tool_call_id="c"),
        m.SystemMessageChunk(content="s"),
        m.ChatMessage(content="c", role="r"),
        m.ChatMessageChunk(content="c", role="r"),
        m.FunctionMessage(content="f", name="n"),
        m.FunctionMessageChunk(content="f", name="n"),
        m.RemoveMessage(id="x"),
        Document(page_content="p", metadata={"a": 1}),
        Send("node", {"x": 1}),
        Interrupt(value=1, id="i"),
        Command(goto="a"),
        Overwrite([1]),
        RemoveMessage("m-1"),
    ]


def test_every_alias_names_a_registered_class_written_under_its_number():
    samples = alias_samples()
    assert len(samples) == len(ALIASES)
    for number, value in enumerate(samples, start=1):
        payload = raw(SER.dumps_typed(value)[1])[2]
        assert payload[0] == number, type(value)
        back = roundtrip(value)
        assert type(back) is type(value) and back == value

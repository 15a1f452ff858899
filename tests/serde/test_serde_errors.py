"""Failing closed: unsupported and untrusted types, exact paths, corrupt bytes, no imports."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import ormsgpack
import pytest

from threadloom.checkpoint.serde import (
    JsonPlusSerializer,
    MsgpackSerializer,
    UnknownObject,
    default_serializer,
    register,
)
from threadloom.errors import CorruptBlobError, SerializationError

EXT_OBJECT = 33


class Opaque:
    pass


@dataclasses.dataclass
class Meta:
    when: object = None


@dataclasses.dataclass
class Msg:
    content: str
    metadata: object = None


def obj_ext(name, state):
    return ormsgpack.Ext(EXT_OBJECT, ormsgpack.packb([name, state]))


def test_dumps_names_path_of_unsupported_value():
    ser = MsgpackSerializer(allowed=[Msg, Meta])
    state = {"messages": [Msg("a"), Msg("b"), Msg("c"), Msg("d", {"when": Opaque()})]}
    with pytest.raises(SerializationError) as info:
        ser.dumps_typed(state)
    err = info.value
    assert err.path == "messages[3].metadata.when"
    assert err.type_name.endswith("Opaque")
    assert "messages[3].metadata.when" in str(err) and "Opaque" in str(err)


def test_dumps_path_through_dataclass_fields_and_tuples():
    ser = MsgpackSerializer(allowed=[Msg, Meta])
    with pytest.raises(SerializationError) as info:
        ser.dumps_typed([(1, Msg("x", Meta(when={2: [Opaque()]})))])
    assert info.value.path == "[0][1].metadata.when[2][0]"


def test_dumps_refuses_unregistered_dataclass_instead_of_dict():
    with pytest.raises(SerializationError, match="not registered") as info:
        default_serializer().dumps_typed({"m": Meta()})
    assert info.value.path == "m"


def test_dumps_non_identifier_keys_use_brackets():
    with pytest.raises(SerializationError) as info:
        default_serializer().dumps_typed({"a b": {3: Opaque()}})
    assert info.value.path == "['a b'][3]"


def test_loads_names_path_and_stored_type():
    writer = MsgpackSerializer(allowed=[Msg, Meta])
    tag, data = writer.dumps_typed({"messages": [Msg("a"), Msg("b", Meta(when=Msg("c")))]})
    reader = MsgpackSerializer(allowed=[Msg])  # Meta not trusted here
    with pytest.raises(SerializationError) as info:
        reader.loads_typed((tag, data))
    assert info.value.path == "messages[1].metadata"
    assert info.value.type_name == f"{Meta.__module__}.{Meta.__qualname__}"
    assert not isinstance(info.value, CorruptBlobError)


def test_on_unknown_raw_returns_fields():
    writer = MsgpackSerializer(allowed=[Msg, Meta])
    tag, data = writer.dumps_typed({"m": Msg("a", Meta(when=1))})
    back = MsgpackSerializer(on_unknown="raw").loads_typed((tag, data))
    assert isinstance(back["m"], UnknownObject)
    assert back["m"].type_name.endswith("Msg")
    assert back["m"]["content"] == "a"
    assert back["m"]["metadata"] == {"when": 1}
    assert back["m"]["metadata"].type_name.endswith("Meta")


def test_on_unknown_rejects_bad_value():
    with pytest.raises(ValueError):
        MsgpackSerializer(on_unknown="pickle")


@pytest.mark.parametrize(
    "name,state",
    [
        ("os.system", "echo pwned"),
        ("subprocess.Popen", {"args": ["touch", "/tmp/pwned"]}),
        ("builtins.eval", "__import__('os')"),
        ("threadloom_evil_module_xyz.Thing", {}),
    ],
)
def test_stored_names_are_never_imported_or_called(monkeypatch, name, state):
    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: called.append(a))
    data = ormsgpack.packb({"x": obj_ext(name, state)})
    with pytest.raises(SerializationError) as info:
        default_serializer().loads_typed(("msgpack", data))
    assert info.value.type_name == name and info.value.path == "x"
    raw = MsgpackSerializer(on_unknown="raw").loads_typed(("msgpack", data))
    assert raw["x"].type_name == name
    assert called == []
    assert "threadloom_evil_module_xyz" not in sys.modules


def test_exception_with_dangerous_type_name_revives_as_generic_error(monkeypatch):
    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    data = ormsgpack.packb(
        obj_ext("exception", {"type": "os.system", "message": "rm", "args": ["rm"]})
    )
    err = default_serializer().loads_typed(("msgpack", data))
    assert type(err).__name__ == "RevivedError" and err.type_name == "os.system"
    assert called == []


def test_pickle_and_json_tags_are_never_read():
    import pickle

    for tag in ("pickle", "json"):
        with pytest.raises(SerializationError, match="never read"):
            default_serializer().loads_typed((tag, pickle.dumps(Opaque())))


@pytest.mark.parametrize(
    "data",
    [
        b"\xc1",  # reserved byte
        b"\x92\x01",  # truncated array
        b"",
        ormsgpack.packb(ormsgpack.Ext(99, b"x")),  # unknown extension
        ormsgpack.packb(ormsgpack.Ext(EXT_OBJECT, b"\xc1")),
        ormsgpack.packb(ormsgpack.Ext(EXT_OBJECT, ormsgpack.packb([1, 2]))),
        ormsgpack.packb(ormsgpack.Ext(32, b"\x05")),  # tuple payload not an array
        ormsgpack.packb(obj_ext("uuid", b"short")),  # state that does not revive
        ormsgpack.packb(obj_ext("datetime", [2024])),
    ],
)
def test_corrupt_bytes_raise_serialization_error(data):
    with pytest.raises(SerializationError):
        default_serializer().loads_typed(("msgpack", data))


def test_corrupt_zstd_is_corrupt_blob():
    with pytest.raises(CorruptBlobError):
        default_serializer().loads_typed(("msgpack+zstd", b"\x28\xb5\x2f\xfdnonsense"))


def test_unknown_tag():
    with pytest.raises(SerializationError, match="unknown serialization tag"):
        default_serializer().loads_typed(("yaml", b""))


def test_register_conflicting_name():
    @dataclasses.dataclass
    class A:
        pass

    @dataclasses.dataclass
    class B:
        pass

    register(A, name="tests.serde.conflict")
    register(A, name="tests.serde.conflict")  # idempotent
    with pytest.raises(ValueError, match="already taken"):
        register(B, name="tests.serde.conflict")


def test_register_as_decorator_and_custom_codec():
    @register(name="tests.serde.Money")
    @dataclasses.dataclass(frozen=True)
    class Money:
        cents: int

    class Celsius:
        def __init__(self, v):
            self.v = v

    register(Celsius, name="tests.serde.Celsius", encode=lambda c: c.v, decode=Celsius)
    back = default_serializer().loads_typed(
        default_serializer().dumps_typed([Money(5), Celsius(21.5)])
    )
    assert back[0] == Money(5) and back[1].v == 21.5
    with pytest.raises(TypeError, match="encode= and decode="):
        register(Opaque)


def test_allowed_takes_classes_only():
    with pytest.raises(TypeError, match="classes"):
        MsgpackSerializer(allowed=[("os", "system")])
    with pytest.raises(TypeError, match="cannot derive"):
        MsgpackSerializer(allowed=[Opaque])
    assert MsgpackSerializer(allowed=[int, dict, list, type(None)]).dumps_typed([1])[0] == "msgpack"


def test_with_allowlist_returns_new_serializer_and_is_cheap():
    base = MsgpackSerializer()
    extended = base.with_allowlist([Msg])
    assert extended is not base and Msg in extended.allowed and Msg not in base.allowed
    assert extended.with_allowlist([Msg]) is extended
    assert extended.loads_typed(extended.dumps_typed(Msg("x"))) == Msg("x")
    with pytest.raises(SerializationError):
        base.dumps_typed(Msg("x"))


def test_jsonplus_compat():
    ser = JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=[Msg])
    assert ser.loads_typed(ser.dumps_typed({"m": Msg("x")})) == {"m": Msg("x")}
    assert ser.with_msgpack_allowlist([Meta]).loads_typed(ser.dumps_typed(1)) == 1
    with pytest.raises(ValueError, match="pickle"):
        JsonPlusSerializer(pickle_fallback=True)
    with pytest.raises(ValueError):
        JsonPlusSerializer(allowed_msgpack_modules=True)
    with pytest.raises(TypeError, match="class itself"):
        JsonPlusSerializer(allowed_msgpack_modules=[("os", "system")])


def test_too_deep_nesting_is_a_serialization_error():
    value: list = []
    for _ in range(400):
        value = [value]
    with pytest.raises(SerializationError):
        default_serializer().dumps_typed(value)


def test_too_deep_tuple_nesting_is_a_serialization_error():
    value: tuple = ()
    for _ in range(3000):
        value = (value,)
    with pytest.raises(SerializationError, match="too deeply"):
        default_serializer().dumps_typed(value)

"""Round trips of every supported type, one by one, keeping exact types."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import enum
import fractions
import ipaddress
import pathlib
import re
import sys
import typing
import uuid
import zoneinfo

import pytest

from threadloom.checkpoint.serde import MsgpackSerializer, RevivedError, register
from threadloom.errors import CheckpointNotFoundError, GraphInterrupt
from threadloom.types import Command, Interrupt, Overwrite, PregelTask, Send, StateSnapshot

SER = MsgpackSerializer()


def roundtrip(value, ser=SER):
    return ser.loads_typed(ser.dumps_typed(value))


class Color(enum.Enum):
    RED = 1
    BLUE = (2, "b")


if sys.version_info >= (3, 11):

    class Mood(enum.StrEnum):
        HAPPY = "happy"
else:  # pragma: no cover

    class Mood(str, enum.Enum):
        HAPPY = "happy"


class Level(enum.IntEnum):
    LOW = 1


class Perm(enum.Flag):
    R = 1
    W = 2


@dataclasses.dataclass
class Point:
    x: int
    y: typing.Any = None


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    a: tuple
    b: Mood = Mood.HAPPY


class Pair(typing.NamedTuple):
    left: typing.Any
    right: int = 0


for _cls in (Color, Mood, Level, Perm, Point, Frozen, Pair):
    register(_cls)

VALUES = [
    0,
    -(2**63),
    2**64 - 1,
    2**200,
    -(2**100),
    1.5,
    float("inf"),
    True,
    "text",
    "lone \ud800 surrogate",
    b"\x00raw",
    [1, [2, [3]]],
    (1, (2, (3,)), ()),
    {"a": (1, 2)},
    {1: "int key", (1, "t"): "tuple key", None: 0, 2.5: "f", b"k": "bytes key"},
    {Color.RED: "enum key", Level.LOW: "intenum key", Mood.HAPPY: "strenum key", "x": 1},
    {uuid.UUID(int=5): "uuid key", dt.date(2024, 1, 2): "date key"},
    dt.datetime(2024, 5, 6, 7, 8, 9, 123456),
    dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc),
    dt.datetime(2024, 11, 3, 1, 30, tzinfo=zoneinfo.ZoneInfo("America/New_York"), fold=1),
    dt.date(1999, 12, 31),
    dt.time(23, 59, 1, 5, tzinfo=dt.timezone(dt.timedelta(hours=-3), "BRT")),
    dt.timedelta(days=-1, seconds=5, microseconds=7),
    dt.timezone(dt.timedelta(minutes=90)),
    zoneinfo.ZoneInfo("Asia/Tokyo"),
    uuid.uuid4(),
    decimal.Decimal("3.14159265358979323846264338327950288"),
    decimal.Decimal("NaN"),
    {1, 2, 3},
    frozenset({"a", (1, 2)}),
    collections.deque([1, 2, 3], maxlen=5),
    collections.deque(),
    collections.defaultdict(list, {"a": [1]}),
    collections.defaultdict(None, {1: 2}),
    collections.Counter("mississippi"),
    collections.OrderedDict([("z", 1), ("a", 2)]),
    pathlib.Path("/tmp/x"),
    pathlib.PurePosixPath("a/b"),
    pathlib.PureWindowsPath("C:\\x\\y"),
    re.compile(r"^a+\d", re.IGNORECASE | re.MULTILINE),
    re.compile(rb"bytes"),
    ipaddress.IPv4Address("10.0.0.1"),
    ipaddress.IPv6Address("::1"),
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv6Network("fe80::/64"),
    ipaddress.IPv4Interface("10.0.0.1/24"),
    ipaddress.IPv6Interface("::1/128"),
    fractions.Fraction(-7, 3),
    fractions.Fraction(2**80, 3),
    complex(1.5, -2),
    range(0, 10, 3),
    Color.RED,
    Color.BLUE,
    Mood.HAPPY,
    Level.LOW,
    Perm.R | Perm.W,
    Point(1, Point(2, [Color.RED])),
    Frozen((1, Mood.HAPPY)),
    Pair(Pair(1, 2), 3),
    Send("node", {"x": (1, 2)}),
    Command(update={"a": 1}, goto=[Send("n", 1)], resume={"id": "yes"}),
    Command(graph=Command.PARENT, goto="x"),
    Interrupt({"question": "ok?"}, id="abc"),
    Overwrite([1, 2]),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_roundtrip_keeps_value_and_type(value):
    back = roundtrip(value)
    assert type(back) is type(value)
    if isinstance(value, decimal.Decimal) and value.is_nan():
        assert back.is_nan()
    else:
        assert back == value
    if isinstance(value, dict):
        assert [type(k) for k in back] == [type(k) for k in value]
        assert list(back) == list(value)


def test_nested_enums_keep_their_type():
    value = {"m": [{"mood": Mood.HAPPY, "lvl": Level.LOW, "p": Point(Mood.HAPPY)}]}
    back = roundtrip(value)
    inner = back["m"][0]
    assert type(inner["mood"]) is Mood
    assert type(inner["lvl"]) is Level
    assert type(inner["p"].x) is Mood


def test_tagged_special_values():
    assert SER.dumps_typed(None) == ("null", b"")
    assert SER.dumps_typed(b"abc") == ("bytes", b"abc")
    assert SER.dumps_typed(bytearray(b"abc")) == ("bytes", b"abc")
    assert SER.loads_typed(("null", b"")) is None
    assert SER.dumps_typed({"a": 1})[0] == "msgpack"


def test_dataclass_revives_without_init_and_tolerates_evolution():
    calls = []

    @dataclasses.dataclass
    class Evolving:
        a: int

        def __post_init__(self):
            calls.append(self.a)

    ser = MsgpackSerializer(allowed=[Evolving])
    tag, data = ser.dumps_typed(Evolving(1))
    assert calls == [1]

    @dataclasses.dataclass
    class Evolving2:  # same stored name, field added with a default
        a: int
        b: list = dataclasses.field(default_factory=list)

    Evolving2.__qualname__ = Evolving.__qualname__
    back = MsgpackSerializer(allowed=[Evolving2]).loads_typed((tag, data))
    assert back == Evolving2(1, [])
    assert calls == [1]  # __post_init__ not re-run on load


def test_exceptions_registered_and_unknown():
    err = roundtrip(ValueError("bad", 3))
    assert type(err) is ValueError and err.args == ("bad", 3)

    nf = roundtrip(CheckpointNotFoundError("t1", "c1"))
    assert type(nf) is CheckpointNotFoundError
    assert (nf.thread_id, nf.checkpoint_id) == ("t1", "c1")
    assert str(nf) == str(CheckpointNotFoundError("t1", "c1"))

    gi = roundtrip(GraphInterrupt((Interrupt(1),)))
    assert type(gi) is GraphInterrupt

    class PrivateError(Exception):
        pass

    back = roundtrip({"error": PrivateError("boom", object())})["error"]
    assert isinstance(back, RevivedError)
    assert back.type_name.endswith("PrivateError")
    assert "boom" in back.message
    assert roundtrip(back).type_name == back.type_name


def test_pregel_task_and_snapshot():
    task = PregelTask(
        "tid", "node", ("__pregel_pull", "node"), None, (Interrupt(1, "i"),), None, {"r": 1}
    )
    snap = StateSnapshot(
        {"k": 1},
        ("node",),
        {"configurable": {"thread_id": "t"}},
        {"step": 1},
        "2024",
        None,
        (task,),
    )
    back = roundtrip(snap)
    assert back == snap and type(back.tasks[0]) is PregelTask


def test_defaultdict_with_unstorable_factory_is_refused():
    from threadloom.errors import SerializationError

    with pytest.raises(SerializationError, match="factory") as info:
        SER.dumps_typed({"d": collections.defaultdict(lambda: 0)})
    assert info.value.path == "d"


def test_datetime_with_foreign_tzinfo_is_refused():
    from threadloom.errors import SerializationError

    class Tz(dt.tzinfo):
        def utcoffset(self, d):
            return dt.timedelta(0)

    with pytest.raises(SerializationError, match="tzinfo"):
        SER.dumps_typed([dt.datetime(2024, 1, 1, tzinfo=Tz())])

"""Property tests: nested values of every supported type round-trip with exact types."""

from __future__ import annotations

import collections
import dataclasses
import enum
import ipaddress
import pathlib
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.serde import MsgpackSerializer, register, stable_key

pydantic = pytest.importorskip("pydantic")


class Suit(enum.Enum):
    HEARTS = "h"
    SPADES = "s"


class Rank(enum.IntEnum):
    ACE = 1
    KING = 13


@dataclasses.dataclass
class Box:
    content: typing.Any
    label: str = ""


class Duo(typing.NamedTuple):
    first: typing.Any
    second: typing.Any = None


class Model(pydantic.BaseModel):
    payload: typing.Any = None
    tag: str = "t"


for _cls in (Suit, Rank, Box, Duo, Model):
    register(_cls)

SER = MsgpackSerializer(compress_threshold=256)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

hashable_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**130), max_value=2**130),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.text(alphabet=st.characters(categories=["Cs", "Ll"]), max_size=4),  # lone surrogates
    st.binary(max_size=8),
    st.sampled_from(list(Suit) + list(Rank)),
    st.datetimes(timezones=st.none() | st.timezones()),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.uuids(),
    st.decimals(allow_nan=False),
    st.fractions(),
    st.complex_numbers(allow_nan=False),
    st.ip_addresses(),
    st.builds(pathlib.PurePosixPath, st.text("ab/", max_size=6)),
    st.builds(range, st.integers(-5, 5), st.integers(-5, 5)),
)
hashables = st.recursive(
    hashable_leaves,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=4,
)


def containers(inner):
    return st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.dictionaries(hashables, inner, max_size=3),
        st.sets(hashables, max_size=3),
        st.lists(inner, max_size=3).map(collections.deque),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=3).map(collections.Counter),
        st.dictionaries(hashables, inner, max_size=3).map(collections.OrderedDict),
        st.dictionaries(st.text(max_size=3), st.lists(inner, max_size=2), max_size=2).map(
            lambda d: collections.defaultdict(list, d)
        ),
        st.builds(Box, inner, st.text(max_size=3)),
        st.builds(Duo, inner, inner),
        st.builds(Model, payload=inner),
    )


values = st.recursive(hashables, containers, max_leaves=20)


def assert_same(a, b, path="value"):
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, dict):
        assert list(map(type, a)) == list(map(type, b)), path
        assert list(a) == list(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple, collections.deque)) and not isinstance(a, range):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, Box):
        assert_same(a.content, b.content, f"{path}.content")
        assert a.label == b.label
    elif isinstance(a, Model):
        assert_same(a.payload, b.payload, f"{path}.payload")
        assert a.model_fields_set == b.model_fields_set
    else:
        assert a == b, path


@SETTINGS
@given(values)
def test_roundtrip(value):
    assert_same(value, SER.loads_typed(SER.dumps_typed(value)))


@SETTINGS
@given(values)
def test_roundtrip_is_stable(value):
    """Serializing the revived value gives the same tag (and bytes, sets aside)."""
    tag, data = SER.dumps_typed(value)
    again = SER.dumps_typed(SER.loads_typed((tag, data)))
    assert again[0] == tag


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=4), hashables, max_size=6), st.randoms())
def test_stable_key_ignores_order(d, rnd):
    items = list(d.items())
    rnd.shuffle(items)
    assert stable_key(d) == stable_key(dict(items))
    assert stable_key(set(d)) == stable_key(set(reversed(list(d))))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(), min_size=1, max_size=5))
def test_stable_key_distinguishes_types(xs):
    assert stable_key(xs) != stable_key(tuple(xs))


def test_ip_and_paths_present():
    assert ipaddress and pathlib  # strategies above cover them

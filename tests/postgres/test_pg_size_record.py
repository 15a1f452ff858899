"""Checkpoint records write the usual inline-value tags as small ints (1 byte
instead of 5-8 a value: ~11 bytes a checkpoint in the bench's conversation);
records written before, with text tags, decode to the same state."""

from __future__ import annotations

import ormsgpack
from hypothesis import given
from hypothesis import strategies as st

from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.record import _TAG_NAMES, State, apply, encode

TAGS = [*_TAG_NAMES, "json", "pickle"]


def _state(values: dict[str, tuple[str, bytes]], version: int) -> State:
    cv = {c: (version, 7) for c in values}
    iv = {c: [(version, 7), tag, data] for c, (tag, data) in values.items()}
    return State(cv, {"node": dict(cv)}, iv, 0)


def _text_tags(data: bytes) -> bytes:
    """The record as a threadloom before the tag codes wrote it."""
    rec = ormsgpack.unpackb(data)
    for e in rec.get("iv", []):
        if type(e[1]) is int:
            e[1] = _TAG_NAMES[e[1]]
    return ormsgpack.packb(rec)


@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "messages", "branch:to:x"]),
        st.tuples(st.sampled_from(TAGS), st.binary(max_size=20)),
        min_size=1,
    )
)
def test_tag_codes_decode_like_text_tags(values):
    state = _state(values, 3)
    data = encode({"v": 4, "ts": 1}, None, state, None)
    old = _text_tags(data)
    assert len(data) <= len(old)
    new_state, core, _ = apply(record.decode(data), None)
    old_state, old_core, _ = apply(record.decode(old), None)
    assert new_state.iv == old_state.iv == {c: [(3, 7), t, d] for c, (t, d) in values.items()}
    assert core == old_core


def test_usual_tags_take_one_byte():
    values = {"a": ("msgpack", b"*"), "b": ("null", b"")}
    data = encode({"v": 4}, None, _state(values, 1), None)
    assert len(_text_tags(data)) - len(data) == (8 - 1) + (5 - 1)

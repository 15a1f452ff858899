"""Checkpoint records (all backends) are written compactly: ``[mask, field, ...]``
instead of a map with key names, and the usual inline-value tags as small ints
(1 byte instead of 5-8 a value): ~25 bytes less a checkpoint in the bench's
conversation. Records written before (a map, text tags) decode to the same state."""

from __future__ import annotations

import ormsgpack
from hypothesis import given
from hypothesis import strategies as st

from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.record import _TAG_NAMES, State, apply, encode

TAGS = [*_TAG_NAMES, "json", "pickle"]
CHANNELS = ["a", "b", "messages", "branch:to:x"]


def _state(values: dict[str, tuple[str, bytes]], version: int) -> State:
    cv = {c: (version, 7) for c in values}
    iv = {c: [(version, 7), tag, data] for c, (tag, data) in values.items()}
    return State(cv, {"node": dict(cv)}, iv, 0)


def _old_form(data: bytes) -> bytes:
    """The record as a threadloom before the compact layout wrote it."""
    rec = record.decode(data)
    for e in rec.get("iv", []):
        if type(e[1]) is int:
            e[1] = _TAG_NAMES[e[1]]
    return ormsgpack.packb(rec)


values_st = st.dictionaries(
    st.sampled_from(CHANNELS),
    st.tuples(st.sampled_from(TAGS), st.binary(max_size=20)),
    min_size=1,
)


@given(values_st, values_st, st.sampled_from([None, 1, 12345678901234]), st.booleans())
def test_compact_records_decode_like_the_old_form(first, second, ts, updated):
    core: dict = {"v": 4, "ts": ts}
    if updated:
        core["updated_channels"] = sorted(second)
    keyframe = _state(first, 3)
    chain = [encode(core, None, keyframe, None)]
    diff = _state({**first, **second}, 4)
    diff.depth = 1
    chain.append(encode(core, {"extra": 1}, diff, keyframe))
    prev_new = prev_old = None
    for data in chain:
        old = _old_form(data)
        assert type(ormsgpack.unpackb(data)) is list and len(data) < len(old)
        new_state, new_core, new_extra = apply(record.decode(data), prev_new)
        old_state, old_core, old_extra = apply(record.decode(old), prev_old)
        assert (new_state.cv, new_state.vs, new_state.iv) == (
            old_state.cv,
            old_state.vs,
            old_state.iv,
        )
        assert (new_core, new_extra, new_state.depth) == (old_core, old_extra, old_state.depth)
        prev_new, prev_old = new_state, old_state
    assert prev_new.iv == {c: [(4, 7), t, d] for c, (t, d) in {**first, **second}.items()}


def test_usual_tags_take_one_byte():
    values = {"a": ("msgpack", b"*"), "b": ("null", b"")}
    rec = record.decode(encode({"v": 4}, None, _state(values, 1), None))
    assert [e[1] for e in rec["iv"]] == [0, 1]  # "msgpack", "null"

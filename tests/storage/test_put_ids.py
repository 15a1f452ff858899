"""Per-put shortcuts for a checkpoint's ids and metadata (issue #9, CPU).

``dump_metadata`` formats the runtime's standard metadata directly, and
``pack_ts_for`` takes the ``ts``/id the process just made from ``ids`` instead
of parsing them. Both must give exactly what the general path gives, for
every input: stored bytes and metadata text do not change.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint import ids
from threadloom.checkpoint.storage import packing, rows

_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["loop", "input", "update", "fork", 'a"b\\c\n\u0000\u2028', "\u00e9\U0001f600"]
)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _text)
_parents = st.dictionaries(_text, _text, max_size=3) | st.dictionaries(
    st.one_of(_text, st.integers()), st.one_of(_scalar, st.lists(_text, max_size=2)), max_size=3
)


class _StrChild(str):
    pass


@st.composite
def _metadata(draw: Any) -> dict[str, Any]:
    values = {
        "source": draw(_text | _scalar | st.builds(_StrChild, _text)),
        "step": draw(st.integers(-3, 10**20) | _scalar),
        "parents": draw(_parents | _scalar),
    }
    keys = draw(st.permutations(["source", "step", "parents"]))
    extra = draw(st.dictionaries(st.sampled_from(["run_id", "writes", "x"]), _scalar, max_size=1))
    md = {k: values[k] for k in keys}
    md.update(extra)
    if draw(st.booleans()):
        md.pop(draw(st.sampled_from(keys)))
    return md


_configs = st.fixed_dictionaries(
    {
        "configurable": st.dictionaries(
            st.sampled_from(["thread_id", "checkpoint_ns", "run_id", "checkpoint_id"]),
            _text,
        )
    },
    optional={"metadata": st.dictionaries(st.sampled_from(["user", "run_id", "step"]), _scalar)},
)


@settings(max_examples=400, deadline=None)
@given(_configs, _metadata())
def test_standard_metadata_text_matches_the_encoder(config: Any, metadata: Any) -> None:
    assert rows.dump_metadata(config, metadata) == rows._dump_general(config, metadata)


@settings(max_examples=300, deadline=None)
@given(_text, st.integers(-3, 10**30), st.dictionaries(_text, _text, max_size=4), _configs)
def test_the_runtime_shape_matches_the_encoder(
    source: str, step: int, parents: dict[str, str], config: Any
) -> None:
    md = {"source": source, "step": step, "parents": parents}
    config.pop("metadata", None)
    config["configurable"].pop("run_id", None)
    assert rows._standard_text(md) is not None  # the fast path is taken
    assert rows.dump_metadata(config, md) == rows._dump_general(config, md)


def test_the_runtime_shape_takes_the_fast_path() -> None:
    md = {"source": "loop", "step": 3, "parents": {"": "1f1e-x", "a\u00e9": 'q"'}}
    text = rows._standard_text(md)
    assert text == '{"source":"loop","step":3,"parents":{"":"1f1e-x","a\u00e9":"q\\""}}'
    assert rows.dump_metadata({"configurable": {"thread_id": "t"}}, md) == (text, None)
    assert rows._standard_text({"source": "loop", "step": True, "parents": {}}) is None


def test_last_made_ts_and_id_pack_as_if_parsed() -> None:
    for step in (-2, -1, 0, 7, None):
        ts, cid = ids.now_iso(), ids.uuid6_str(step)
        uuid.UUID(cid)  # well formed
        assert ids.LAST_ID[0] == cid and ids.LAST_TS[0] == ts
        expected = packing.pack_ts(ts) - packing.id_micros(cid)
        # a copy of each string: equal, not the same object, still the fast path
        fast = packing.pack_ts_for("".join(list(ts)), "".join(list(cid)))
        assert fast == packing.TsDelta(expected)
        ids.now_iso(), ids.uuid6_str(step)  # now neither is the last made: parsed
        assert packing.pack_ts_for(ts, cid) == fast


def test_uuid6_str_is_the_uuid6_of_its_ticks() -> None:
    for step in (-2, -1, 0, 5, 1 << 20, None):
        cid = ids.uuid6_str(step)
        u = uuid.UUID(cid)
        assert u.version == 6 and u.variant == uuid.RFC_4122 and str(u) == cid
        if step is not None:
            assert u.clock_seq == step & 0x3FFF
        assert packing.id_micros(cid) == (ids.LAST_ID[1] - 0x01B21DD213814000) // 10


def test_slots_match_only_their_own_strings() -> None:
    ts, cid = ids.now_iso(), ids.uuid6_str(1)

    class Sub(str):
        pass

    # a str subclass is not packed by pack_ts: the slot must not change that
    assert packing.pack_ts_for(Sub(ts), cid) == Sub(ts)
    assert type(packing.pack_ts_for(ts, Sub(cid))) is int  # no id time: plain micros
    ids.LAST_TS, saved = (None, 0, 0), ids.LAST_TS
    try:
        assert packing.pack_ts_for("", "") == ""  # the empty slot matches nothing
    finally:
        ids.LAST_TS = saved


_versions = st.one_of(
    st.none(),
    st.integers(0, 10**6),
    st.floats(0, 1e6, allow_nan=False),
    st.builds(lambda n, tail: f"{n:032}.{tail}", st.integers(0, 10**8), _text),
    st.builds(lambda n: f"{n:032}.0.5", st.integers(0, 10**8)),
    st.sampled_from(["7", "3.25", "\u0667" * 32 + ".1", "1" * 40 + ".2"]),
)


def _reference_next(current: Any) -> str:
    """LangGraph's format: the counter after ``current``'s, a random float tail."""
    import random

    return f"{ids.version_counter(current) + 1:032}.{random.random():016}"


@settings(max_examples=300, deadline=None)
@given(_versions, st.integers(0, 2**32))
def test_next_version_is_the_reference_format(current: Any, seed: int) -> None:
    import random

    for _ in range(2):  # the second call hits the memoized counter text
        random.seed(seed)
        try:
            expected: Any = _reference_next(current)
        except ValueError as exc:
            expected = type(exc)
        random.seed(seed)
        try:
            got: Any = ids.next_version(current)
        except ValueError as exc:
            got = type(exc)
        assert got == expected


def test_uuid6_str_head_follows_the_clock(monkeypatch: Any) -> None:
    """The memoized first 15 characters change with the ticks they encode."""
    import time as time_module

    monkeypatch.setattr(ids, "_last_ticks", ids._last_ticks)  # restored: later ids follow the clock
    base = time_module.time_ns() + 10**10  # ahead of every id made so far
    for offset_ns in (0, 100, 409_500, 409_600, 409_700, 10**9, 30 * 10**9, 60 * 10**9):
        monkeypatch.setattr(ids.time, "time_ns", lambda o=offset_ns: base + o)
        cid = ids.uuid6_str(0)
        ticks = (base + offset_ns) // 100 + 0x01B21DD213814000
        assert ids.LAST_ID == (cid, ticks)
        assert packing.id_micros(cid) == (ticks - 0x01B21DD213814000) // 10
        digits = cid.replace("-", "")  # uuid6: time_high + time_mid, "6", time_low
        assert int(digits[:12], 16) << 12 | int(digits[13:16], 16) == ticks

"""Checkpoint records: keyframes and diffs rebuild exactly; packing is lossless."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.ids import next_version
from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.record import State

names = st.sampled_from(["messages", "branch:to:a", "__start__", "x", "y", "node"])
versions = st.one_of(
    st.integers(0, 50),
    st.tuples(st.integers(0, 10**6), st.floats(0, 1, exclude_max=True)).map(
        lambda t: f"{t[0]:032}.{t[1]:016}"
    ),
    st.text(max_size=5),
)
iv_entries = st.tuples(st.sampled_from(["msgpack", "null"]), st.binary(max_size=8))


@st.composite
def states(draw):
    cv = draw(st.dictionaries(names, versions, max_size=5))
    vs = draw(st.dictionaries(names, st.dictionaries(names, versions, max_size=3), max_size=3))
    iv = {}
    for channel in draw(st.lists(st.sampled_from(sorted(cv) or ["x"]), max_size=3)):
        version = cv.get(channel, draw(versions))
        if draw(st.booleans()):
            version = draw(versions)
        iv[channel] = [record.pack_version(version), *draw(iv_entries)]
    packed_cv = {c: record.pack_version(v) for c, v in cv.items()}
    packed_vs = {n: {c: record.pack_version(v) for c, v in s.items()} for n, s in vs.items()}
    return State(packed_cv, packed_vs, iv, 0)


def _same(a: State, b: State) -> None:
    assert (a.cv, a.vs, a.iv) == (b.cv, b.vs, b.iv)


@settings(max_examples=150, deadline=None)
@given(chain=st.lists(states(), min_size=1, max_size=6), uc=st.one_of(st.none(), st.lists(names)))
def test_diff_chains_rebuild_every_state(chain, uc) -> None:
    prev = None
    for depth, state in enumerate(chain):
        state.depth = depth
        cp = {"v": 4, "ts": "2026-01-02T03:04:05.123456+00:00", "updated_channels": uc, "z": 1}
        core, extra = record.core_fields(cp)
        assert extra == {"z": 1}
        data = record.encode(core, ["msgpack", b"\x81\xa1z\x01"], state, prev)
        rebuilt, got_core, got_extra = record.apply(record.decode(data), prev)
        _same(rebuilt, state)
        assert got_core == core and got_extra == ["msgpack", b"\x81\xa1z\x01"]
        assert record.to_checkpoint("id", got_core, extra, rebuilt)["ts"] == cp["ts"]
        prev = rebuilt


def test_rewritten_keyframe_keeps_tables_for_children() -> None:
    a = State({"x": (1, 0.5)}, {}, {}, 0)
    record.encode({"v": 4}, None, a, None)
    b = State({"x": (2, 0.25), "y": (2, 0.25)}, {"n": {"x": (1, 0.5)}}, {}, 1)
    child = record.encode({"v": 4}, None, b, a)
    # rebase b as a keyframe (its parent is being deleted): c must still decode
    b_state, _, _ = record.apply(record.decode(child), a)
    c = State({"x": (3, 0.125), "y": (2, 0.25)}, {"n": {"y": (2, 0.25)}}, {}, 2)
    grandchild = record.encode({"v": 4}, None, c, b_state)
    keyframe = State(b_state.cv, b_state.vs, b_state.iv, 0, b_state.names, b_state.versions)
    rebased, _, _ = record.apply(record.decode(record.encode({"v": 4}, None, keyframe, None)), None)
    _same(rebased, b_state)
    again, _, _ = record.apply(record.decode(grandchild), rebased)
    _same(again, c)


def test_packing_is_exact_or_identity() -> None:
    for version in (next_version(None), next_version(41), "1.0.5", "x" * 40, 7, 2.5):
        assert record.unpack_version(record.pack_version(version)) == version
    for version in (
        f"{7:032}.0.10",
        f"{7:032}.0.0012",
        f"{7:032}.{5e-06:016}",
        f"{7:032}.{0.25:016}",
    ):
        packed = record.pack_version(version)
        assert type(packed) is tuple and record.unpack_version(packed) == version
    assert record.pack_version(f"{7:032}.0.10") == (7, 10)
    assert record.pack_version(f"{7:032}.0.0012") == (7, 12, 4)
    integral = f"{7:032}.{5.0:016}"  # would equal the int form (7, 5): kept as text
    assert record.pack_version(integral) == integral
    odd = f"{7:032}.1.50"  # trailing zero: does not re-format identically
    assert record.pack_version(odd) == odd
    assert record.pack_version(f"{7:032}.0.1x") == f"{7:032}.0.1x"
    assert record.unpack_version((7, 0.25)) == f"{7:032}.{0.25:016}"  # older records
    for ts in ("2026-11-21T23:34:40.183440+00:00", "2026-11-21T23:34:40+00:00", "not a ts"):
        assert record.unpack_ts(record.pack_ts(ts)) == ts
    assert type(record.pack_ts("2026-11-21T23:34:40.183440+00:00")) is int

"""The put path's shortcuts store exactly what the plain computations store."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.storage.test_put_fastpaths import _replay, _rows
from threadloom.checkpoint import ids
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.storage import packing, puts, record
from threadloom.checkpoint.storage.rows import unpack


def test_next_version_hands_over_exactly_the_packed_form() -> None:
    """ids.MADE (versions next_version split for the storage core) holds what
    parsing the text gives, and pack_version returns it either way."""
    version = None
    handed = 0
    for i in range(5000):
        version = ids.next_version(version if i % 500 else None)
        made = ids.MADE.get(version)
        parsed = packing._pack_version(version)
        if made is not None:
            handed += 1
            assert made == parsed
        assert packing.pack_version(version) == parsed
        assert packing.unpack_version(packing.pack_version(version)) == version
    assert handed > 4000  # the usual "0.<digits>" random part


def test_odd_random_parts_are_not_handed_over(monkeypatch) -> None:
    """A random part with an exponent, a leading zero or padding is left to
    the parser (and still round-trips)."""
    for value in (1.5e-05, 0.5, 0.0123456789012345, 0.0):
        monkeypatch.setattr(random, "random", lambda v=value: v)
        version = ids.next_version("00000000000000000000000000000007.0.5")
        assert version == f"{8:032}.{value:016}"
        assert version not in ids.MADE
        assert packing.unpack_version(packing.pack_version(version)) == version


# forks, removed channels, inline and ref'd values, extra keys, keyframes every 3
_PLAN = [
    ({"a": 1, "messages": ["m1"]}, False, None),
    ({"b": "x", "branch:to:x": None}, False, {"extra": 1}),
    ({"a": 2, "messages": ["m1", "m2 " * 30]}, False, None),
    ({"a": None, "b": "large value " * 10}, True, None),
    ({"branch:to:x": 3}, False, None),
    ({"a": 4, "b": "y", "messages": []}, True, {"extra": 1}),
    ({"a": 5}, False, None),
]
# sha256 of the records of this plan: pinned so that a change of the stored
# format is deliberate. The encoder's CPU rewrite (session 5) kept the bytes
# (542874...); the ts delta (session 5, docs/storage.md) changed them on purpose,
# and records of every form read the same (tests/storage/test_ts_delta.py)
_PLAN_RECORDS = "0166a9bff65086abe80e72a487dc8d864044274e098e87063b817737e2c7b780"


def test_records_are_byte_identical_to_the_previous_encoder() -> None:
    saver = InMemorySaver(keyframe_every=3)
    configs = _replay(saver, _PLAN)
    rows = sorted(_rows(saver), key=lambda r: r.checkpoint_id)
    assert len(rows) == len(_PLAN)
    assert hashlib.sha256(b"".join(r.data for r in rows)).hexdigest() == _PLAN_RECORDS
    reader = InMemorySaver()
    reader.executor = saver.executor  # a cold reader decodes every record
    for config in configs[1:]:
        assert reader.get_tuple(config) == saver.get_tuple(config)


def test_a_compacted_list_holds_its_segments_through_a_prune() -> None:
    """put_flow counts a new manifest's holds on its segments (it skips that
    bookkeeping only when no blob it sent has children)."""
    saver = InMemorySaver(compact_every=2)
    config: dict = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    version, items = None, []
    for i in range(7):
        items = [*items, f"item {i} " * 20]  # each item well above inline_max
        version = ids.next_version(version)
        cp = empty_checkpoint()
        cp["id"] = ids.uuid6_str()
        cp["channel_values"] = {"messages": list(items)}
        cp["channel_versions"] = {"messages": version}
        config = saver.put(config, cp, {"step": i}, {"messages": version})
    counts = saver.executor.counts
    manifests = [row for row in saver.executor.blobs.values() if row.children]
    assert manifests  # the list was compacted
    for manifest in manifests:
        for child in unpack(manifest.children):
            assert counts[child] >= 1
    saver.prune(["t"], strategy="keep_latest")
    assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == items


def _versions_plan_replay(saver: InMemorySaver, plan: list[tuple[dict, dict]]) -> list[Any]:
    """Puts whose channel_versions/versions_seen gain and LOSE keys."""
    config: dict = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    configs = []
    for i, (cv, vs) in enumerate(plan):
        cp = empty_checkpoint()
        cp["id"] = f"1f1e6366-0b6a-6485-8000-{i:012x}"
        cp["ts"] = f"2026-11-22T05:00:{i:02}.{i + 1:06}+00:00"
        cp["channel_versions"] = {c: f"{n:032}.0.{5 + n}" for c, n in cv.items()}
        cp["versions_seen"] = {node: {c: f"{n:032}.0.{5 + n}"} for node, (c, n) in vs.items()}
        cp["channel_values"] = {c: f"value {n}" for c, n in cv.items()}
        config = saver.put(config, cp, {"step": i}, dict(cp["channel_versions"]))
        configs.append(config)
    return configs


_names = st.sampled_from(["a", "b", "c", "d"])
_plans = st.lists(
    st.tuples(
        st.dictionaries(_names, st.integers(1, 3), max_size=4),
        st.dictionaries(_names, st.tuples(_names, st.integers(1, 3)), max_size=3),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(plan=_plans)
def test_removed_channels_and_nodes_diff_as_a_full_compare_does(plan) -> None:
    """pack_state's change lists (what was removed since the parent, found
    without scanning when nothing can be missing) give the records a full
    diff gives, and every checkpoint reads back as written."""
    fast, plain = InMemorySaver(keyframe_every=5), InMemorySaver(keyframe_every=5)
    configs = _versions_plan_replay(fast, plan)
    saved = record.pack_state

    def no_changes(*args: Any) -> Any:
        return (*saved(*args)[:3], None)  # record.encode diffs against the parent itself

    puts.record.pack_state = no_changes  # type: ignore[attr-defined]
    try:
        _versions_plan_replay(plain, plan)
    finally:
        puts.record.pack_state = saved  # type: ignore[attr-defined]
    assert _rows(fast) == _rows(plain)
    reader = InMemorySaver()
    reader.executor = fast.executor
    for config, (cv, vs) in zip(configs, plan):
        got = reader.get_tuple(config).checkpoint
        assert set(got["channel_versions"]) == set(cv)
        assert set(got["versions_seen"]) == set(vs)

"""The put path's shortcuts store exactly what the plain path stores.

``put_flow`` hands ``record.encode`` the inline values it encoded itself
(``_iv_changes``) instead of letting it diff every inline value against the
parent's again; the records must be byte-identical either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.storage import puts, record
from threadloom.checkpoint.storage.rows import version_key

CHANNELS = ["a", "b", "branch:to:x", "messages"]
values = st.one_of(
    st.none(),  # channel empty (its version stays)
    st.integers(-5, 5),
    st.text(max_size=4),
    st.just("large value " * 10),
    st.lists(st.sampled_from(["m1", "m2 " * 30]), max_size=3),
)
steps = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from(CHANNELS), values, max_size=4),
        st.booleans(),  # fork from the grandparent instead of the parent
        st.one_of(st.none(), st.just({"extra": 1})),
    ),
    min_size=1,
    max_size=20,
)


def _next(version: str | None, salt: int) -> str:
    """A runtime-style version (``<counter>.0.<digits>``), deterministic."""
    n = int(version.split(".")[0]) + 1 if version else 1
    return f"{n:032}.0.{123456789012345 + salt * 7919}"


def _replay(saver: InMemorySaver, plan: list[Any]) -> list[Any]:
    base = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    configs: list[Any] = [base]
    versions: dict[str, Any] = {}
    current: dict[str, Any] = {}
    for i, (updates, fork, extra) in enumerate(plan):
        new_versions = {}
        for channel, value in updates.items():
            new_versions[channel] = versions[channel] = _next(versions.get(channel), i)
            if value is None:
                current.pop(channel, None)
            else:
                current[channel] = value
        cp = empty_checkpoint()
        cp["id"] = f"1f1e6366-0b6a-6485-8000-{i:012x}"
        cp["ts"] = f"2026-11-22T05:00:{i:02}.{i + 1:06}+00:00"
        cp["channel_values"] = dict(current)
        cp["channel_versions"] = dict(versions)
        cp["versions_seen"] = {"node": dict(versions), "other": {"a": versions.get("a", 0)}}
        cp["updated_channels"] = sorted(updates)
        if extra:
            cp.update(extra)
        parent = configs[-2] if fork and len(configs) > 1 else configs[-1]
        configs.append(saver.put(parent, cp, {"step": i}, new_versions))
    return configs


@contextmanager
def _full_diff() -> Iterator[None]:
    """put_flow leaves every inline-value diff to record.encode meanwhile."""
    saved = puts._iv_changes
    puts._iv_changes = lambda *args: None  # type: ignore[assignment]
    try:
        yield
    finally:
        puts._iv_changes = saved  # type: ignore[assignment]


def _rows(saver: InMemorySaver) -> list[Any]:
    return [row for rows in saver.executor.checkpoints.values() for row in rows.values()]


@settings(max_examples=80, deadline=None)
@given(plan=steps)
def test_iv_changes_give_the_records_a_full_diff_gives(plan) -> None:
    fast, plain = InMemorySaver(keyframe_every=6), InMemorySaver(keyframe_every=6)
    configs = _replay(fast, plan)
    with _full_diff():
        _replay(plain, plan)
    assert _rows(fast) == _rows(plain)
    reader = InMemorySaver()
    reader.executor = fast.executor  # a cold reader rebuilds every record
    for config in configs[1:]:
        assert reader.get_tuple(config) == plain.get_tuple(config)


leaves = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=90),
    st.binary(max_size=90),
    st.sampled_from(["x" * 61, "x" * 62, "x" * 63]),  # 63-65 bytes: either side of inline_max
)
channel_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    values=st.dictionaries(st.sampled_from(CHANNELS), channel_values, min_size=1),
    delta=st.booleans(),
)
def test_encode_values_inline_path_gives_what_codec_encode_gives(values, delta) -> None:
    """``_encode_values`` serializes and hashes a value that is neither a list
    nor a dict holding one itself, without ``codec.encode``: same inline
    entries, refs and blobs as the codec gives for every value."""
    codec = InMemorySaver(delta=delta).codec
    versions = {c: _next(None, i) for i, c in enumerate(values)}
    cv = {c: record.pack_version(v) for c, v in versions.items()}
    iv, refs, blobs, _, fresh, _, split = puts._encode_values(
        codec, "t", "", cv, versions, values, versions, None, None
    )
    want_iv, want_refs, want_blobs = {}, [], {}
    for channel, value in values.items():
        vkey = version_key(versions[channel])
        inline, ref, new_blobs, _ = codec.encode("t", "", channel, vkey, value)
        if inline is not None:
            want_iv[channel] = [cv[channel], *inline]
        else:
            want_refs.append(ref)
            want_blobs.update((blob.hash, blob) for blob in new_blobs)
    assert iv == fresh == want_iv
    assert refs == want_refs
    assert blobs == want_blobs
    if not split:  # then no ref needs a blob this put does not send
        assert puts._needs(refs, blobs) == ()

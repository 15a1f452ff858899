"""A checkpoint's ``ts`` stored as a delta from its uuid6 id (issue #7, bytes).

The delta form must read back exactly, cost fewer bytes than the int form,
never be confused with older records' int/str forms, and survive every path
that reads a record again (copy_thread, forks, prune rebasing keyframes).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import ormsgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import now_iso, uuid6_str
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.storage import packing, record
from threadloom.checkpoint.storage.packing import TsDelta

_ID = "1f1e6366-0b6a-6485-8000-000000000001"
_BASE = packing.id_micros(_ID)
assert _BASE is not None


def _ts(micros: int) -> str:
    return packing.unpack_ts(micros)


def _record(checkpoint: dict[str, Any]) -> bytes:
    core, _ = record.core_fields(checkpoint)
    state = record.State({}, {}, {}, 0)
    return record.encode(core, None, state, None)


def _read_ts(data: bytes, checkpoint_id: str) -> Any:
    state, core, _ = record.apply(record.decode(data), None)
    return record.to_checkpoint(checkpoint_id, core, None, state).get("ts")


def test_a_near_ts_costs_three_bytes_instead_of_nine() -> None:
    ts = _ts(_BASE + 5)
    delta = _record({"v": 4, "id": _ID, "ts": ts})
    plain = _record({"v": 4, "id": "not-a-uuid6", "ts": ts})
    assert len(plain) - len(delta) == 6  # uint64 (9 bytes) -> fixext1 (3 bytes)
    assert ormsgpack.packb(ormsgpack.Ext(packing.TS_EXT, b"\x05")) in delta
    assert _read_ts(delta, _ID) == ts and _read_ts(plain, "not-a-uuid6") == ts


@pytest.mark.parametrize(
    ("offset", "size"),
    [(0, 3), (-1, 3), (127, 3), (-128, 3), (128, 4), (-32768, 4), (40_000, 6), (-(1 << 31), 6)],
)
def test_delta_sizes_and_signs(offset: int, size: int) -> None:
    packed = packing.pack_ts_for(_ts(_BASE + offset), _ID)
    assert packed == TsDelta(offset)
    assert len(ormsgpack.packb(packed.ext())) == size
    data = _record({"id": _ID, "ts": _ts(_BASE + offset)})
    assert _read_ts(data, _ID) == _ts(_BASE + offset)


def test_far_ts_keeps_the_int_form() -> None:
    for offset in (1 << 31, -(1 << 31) - 1, 10**12):
        ts = _ts(_BASE + offset)
        assert packing.pack_ts_for(ts, _ID) == _BASE + offset
        assert _read_ts(_record({"id": _ID, "ts": ts}), _ID) == ts


def test_ts_that_does_not_round_trip_is_kept_as_text() -> None:
    for ts in ("2026-11-21T23:34:40.183440+02:00", "not a ts", "2026-11-21 23:34:40+00:00"):
        assert packing.pack_ts_for(ts, _ID) == ts
        assert _read_ts(_record({"id": _ID, "ts": ts}), _ID) == ts


def test_old_records_read_the_same() -> None:
    """Records written before the delta (int micros, str, the map layout)."""
    ts = "2026-11-22T05:00:01.000002+00:00"
    for stored in (packing.pack_ts(ts), ts):
        assert type(stored) in (int, str)
        data = record.encode({"v": 4, "ts": stored}, None, record.State({}, {}, {}, 0), None)
        assert _read_ts(data, _ID) == ts
    old_map = ormsgpack.packb({"k": 0, "v": 4, "ts": packing.pack_ts(ts)})
    assert _read_ts(old_map, _ID) == ts


def test_unknown_ext_types_are_rejected() -> None:
    with pytest.raises(ValueError, match="ext"):
        record.decode(ormsgpack.packb([7, 0, 4, ormsgpack.Ext(7, b"\x01")]))


def test_a_delta_read_under_an_id_without_a_timestamp_fails_loudly() -> None:
    data = _record({"id": _ID, "ts": _ts(_BASE)})
    with pytest.raises(ValueError, match="no timestamp"):
        _read_ts(data, "plain-id")


def _uuid6(ticks: int, low: int) -> str:
    """A uuid6 string with the given 60-bit timestamp (``low``: the other 64 bits)."""
    h = f"{(ticks >> 12) << 80 | 6 << 76 | (ticks & 0xFFF) << 64 | low:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_uuid_like = st.one_of(
    st.builds(_uuid6, st.integers(0, (1 << 60) - 1), st.integers(0, (1 << 64) - 1)),
    st.builds(_uuid6, st.integers(0x1F0000000000000, 0x1F2000000000000), st.just(0x8000 << 48)),
    st.from_regex(r"\A[0-9a-fA-FxX_]{8}-[0-9a-f]{4}-6[0-9a-fxX_ ]{3}-[0-9a-f]{4}-[0-9a-f]{12}\Z"),
    st.text(max_size=40),
)
_when = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(timezone.utc)
)
_ts_text = st.one_of(
    _when.map(lambda d: d.isoformat()),
    _when.map(lambda d: d.isoformat(timespec="milliseconds")),
    _when.map(lambda d: d.astimezone(timezone(timedelta(hours=3))).isoformat()),
    st.text(max_size=40),
)


@settings(max_examples=400, deadline=None)
@given(ts=_ts_text, checkpoint_id=_uuid_like, near=st.integers(-(1 << 33), 1 << 33))
def test_any_ts_and_id_round_trip_exactly(ts: str, checkpoint_id: str, near: int) -> None:
    base = packing.id_micros(checkpoint_id)
    for text in (ts, _ts(base + near) if base is not None and base + near > -6e16 else ts):
        packed = packing.pack_ts_for(text, checkpoint_id)
        assert packing.unpack_ts_for(packed, checkpoint_id) == text
        data = _record({"v": 4, "id": checkpoint_id, "ts": text})
        assert _read_ts(data, checkpoint_id) == text


def test_fresh_checkpoints_use_the_delta() -> None:
    checkpoint_id, ts = uuid6_str(clock_seq=3), now_iso()
    packed = packing.pack_ts_for(ts, checkpoint_id)
    assert type(packed) is TsDelta and abs(packed.delta) < 1_000_000


def _put_chain(saver: InMemorySaver, thread_id: str, n: int) -> list[dict[str, Any]]:
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    checkpoints = []
    for i in range(n):
        cp = empty_checkpoint()
        cp["id"] = uuid6_str(clock_seq=i)
        cp["ts"] = now_iso()
        cp["channel_versions"] = {"a": f"{i + 1:032}.0.5"}
        cp["channel_values"] = {"a": i}
        config = saver.put(config, cp, {"step": i}, {"a": f"{i + 1:032}.0.5"})
        checkpoints.append(cp)
    return checkpoints


def _stored_ts(saver: InMemorySaver, thread_id: str) -> dict[str, str]:
    config = {"configurable": {"thread_id": thread_id}}
    return {t.checkpoint["id"]: t.checkpoint["ts"] for t in saver.list(config)}


def _deltas(saver: InMemorySaver) -> int:
    rows = [r for rows in saver.executor.checkpoints.values() for r in rows.values()]
    return sum(type(record.decode(r.data)["ts"]) is TsDelta for r in rows)


def test_copy_thread_keeps_ids_so_deltas_read_the_same() -> None:
    saver = InMemorySaver(keyframe_every=3)
    written = {cp["id"]: cp["ts"] for cp in _put_chain(saver, "src", 5)}
    assert _deltas(saver) == 5
    saver.copy_thread("src", "dst")
    cold = InMemorySaver()
    cold.executor = saver.executor  # a cold reader decodes every record
    assert _stored_ts(cold, "src") == written == _stored_ts(cold, "dst")


def test_a_fork_and_a_rebased_keyframe_read_their_own_ts() -> None:
    """A fork puts a new checkpoint (new id, the parent's ts copied): its delta is
    taken against its own id. Prune rebases a surviving diff into a keyframe:
    re-encoded under the same id, the delta still reads back."""
    saver = InMemorySaver(keyframe_every=4)
    chain = _put_chain(saver, "t", 4)
    fork = dict(chain[1], id=uuid6_str(clock_seq=9))  # same ts, later id
    parent = {
        "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": chain[1]["id"]}
    }
    saver.put(parent, fork, {"step": 9}, {})
    expected = {cp["id"]: cp["ts"] for cp in [*chain, fork]}
    assert _stored_ts(saver, "t") == expected
    saver.prune(["t"], strategy="keep_last_n", keep_last=2)  # drops the keyframe chain[0]
    cold = InMemorySaver()
    cold.executor = saver.executor
    survivors = _stored_ts(cold, "t")
    assert survivors and all(expected[cid] == ts for cid, ts in survivors.items())
    assert chain[3]["id"] in survivors  # a diff whose chain crossed a doomed row
    assert _deltas(saver) == len(survivors)  # rebased keyframes re-encode the delta


def test_sqlite_stores_and_copies_the_delta(tmp_path) -> None:
    """A byte-storing backend: the rows hold the ext form and read back exactly,
    also after copy_thread and from a fresh connection."""
    from threadloom.checkpoint.sqlite import SqliteSaver

    path = str(tmp_path / "ts.db")
    with SqliteSaver.from_conn_string(path) as saver:
        written = {cp["id"]: cp["ts"] for cp in _put_chain(saver, "src", 4)}
        saver.copy_thread("src", "dst")
    with SqliteSaver.from_conn_string(path) as fresh:
        assert _stored_ts(fresh, "src") == written == _stored_ts(fresh, "dst")
        rows = fresh.conn.execute("SELECT data FROM tl_checkpoints").fetchall()
        assert len(rows) == 8
        assert all(type(record.decode(bytes(r[0]))["ts"]) is TsDelta for r in rows)


def test_update_state_and_a_fork_through_the_graph_read_back_exactly(monkeypatch) -> None:
    """update_state on the latest checkpoint and on an older one (a fork): every
    checkpoint a cold reader rebuilds has the ts the runtime handed to the saver."""
    from typing_extensions import TypedDict

    from threadloom.graph import START, StateGraph

    class S(TypedDict):
        n: int

    builder = StateGraph(S)
    builder.add_node("inc", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "inc")
    given: dict[str, str] = {}
    core_fields = record.core_fields

    def spy(checkpoint: dict[str, Any]) -> Any:
        given[checkpoint["id"]] = checkpoint["ts"]
        return core_fields(checkpoint)

    monkeypatch.setattr(record, "core_fields", spy)
    saver = InMemorySaver(keyframe_every=3)
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "g"}}
    for _ in range(3):
        graph.invoke({"n": 0}, config)
    graph.update_state(config, {"n": 100})
    old = list(graph.get_state_history(config))[-2].config
    graph.update_state(old, {"n": 7})  # a fork from an early checkpoint
    assert len(given) >= 11
    assert _stored_ts(saver, "g") == given
    cold = InMemorySaver()
    cold.executor = saver.executor
    assert _stored_ts(cold, "g") == given
    assert _deltas(saver) == len(given)


def test_a_read_formats_ts_once(tmp_path, monkeypatch) -> None:
    """The read checked ts by formatting it, threw the result away and formatted
    it again when serving the checkpoint."""
    from threadloom.checkpoint.base import empty_checkpoint
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.checkpoint.storage import record, state

    path = str(tmp_path / "ts.db")
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with SqliteSaver.from_conn_string(path) as saver:
        cfg = saver.put(cfg, empty_checkpoint(), {"step": 0}, {})
    calls = []
    for module in (record, state):
        real = module.unpack_ts_for
        monkeypatch.setattr(
            module, "unpack_ts_for", lambda p, c, real=real: calls.append(c) or real(p, c)
        )
    with SqliteSaver.from_conn_string(path) as saver:  # nothing cached
        ts = saver.get_tuple(cfg).checkpoint["ts"]
        assert saver.get_tuple(cfg).checkpoint["ts"] == ts
    assert len(calls) == 1

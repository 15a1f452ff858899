"""Checkpoint/task ids stored as 16 bytes when canonical UUIDs: the
conversion caches in both directions must round-trip exactly and stay bounded."""

from __future__ import annotations

import uuid
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.sqlite import SqliteSaver, common
from threadloom.checkpoint.sqlite.common import dec_id, enc_id


@given(st.uuids())
def test_canonical_uuids_round_trip_through_bytes(u: uuid.UUID) -> None:
    text = str(u)
    raw = enc_id(text)
    assert raw == u.bytes
    assert dec_id(raw) == text
    assert enc_id(text) == raw and dec_id(u.bytes) == text  # cached answers agree


@given(st.text(max_size=40) | st.none())
@example("00000000-0000-0000-0000-0000000000--")  # 15 bytes once its dashes go
@example("00000000-0000-0000-0000-00000--00000")
@example("adad98-9-b9aa-ceae-d7ad-03a7c22d953-")
def test_other_ids_are_kept_as_they_are(text: str | None) -> None:
    value = enc_id(text)
    if type(value) is bytes:  # only canonical lowercase UUID text converts
        assert text == str(uuid.UUID(bytes=value))
    else:
        assert value == text and dec_id(value) == text


def test_uppercase_uuid_text_is_not_converted() -> None:
    text = str(uuid.uuid4()).upper()
    assert enc_id(text) == text


def test_caches_are_bounded() -> None:
    for _ in range(common._KEEP + 10):
        dec_id(uuid.uuid4().bytes)
    assert len(common._DEC) <= common._KEEP and len(common._ENC) <= common._KEEP


def test_ids_with_extra_dashes_never_collide(tmp_path: Path) -> None:
    """Two 36-char ids with dashes beyond the UUID's four are distinct checkpoints."""
    ids = ["00000000-0000-0000-0000-0000000000--", "00000000-0000-0000-0000-00000--00000"]
    with SqliteSaver.from_conn_string(str(tmp_path / "x.db")) as saver:
        for n, cid in enumerate(ids):
            cp = empty_checkpoint()
            cp["id"] = cid
            cp["channel_values"] = {"n": n}
            cp["channel_versions"] = {"n": str(n + 1)}
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            saver.put(config, cp, {"source": "loop", "step": n}, {"n": str(n + 1)})
        for n, cid in enumerate(ids):
            got = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": cid}})
            assert got is not None and got.checkpoint["id"] == cid
            assert got.checkpoint["channel_values"] == {"n": n}
        listed = [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "t"}})]
        assert sorted(listed) == sorted(ids)

"""Checkpoint/task ids stored as 16 bytes when canonical UUIDs: the
conversion caches in both directions must round-trip exactly and stay bounded."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from threadloom.checkpoint.sqlite import common
from threadloom.checkpoint.sqlite.common import dec_id, enc_id


@given(st.uuids())
def test_canonical_uuids_round_trip_through_bytes(u: uuid.UUID) -> None:
    text = str(u)
    raw = enc_id(text)
    assert raw == u.bytes
    assert dec_id(raw) == text
    assert enc_id(text) == raw and dec_id(u.bytes) == text  # cached answers agree


@given(st.text(max_size=40) | st.none())
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

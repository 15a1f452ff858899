"""Rotating away from a single AES-GCM key: the old key is id "0", as docs/serde.md shows,
and a reader missing it says which id to list and how."""

from __future__ import annotations

import pytest

from threadloom.checkpoint.serde import AesGcmCipher, MsgpackSerializer
from threadloom.errors import CorruptBlobError

pytest.importorskip("cryptography")

OLD, NEW = b"1" * 32, b"2" * 32
VALUE = {"log": ["a", "b"]}


def test_documented_rotation_from_a_single_key_reads_old_rows():
    old_row = MsgpackSerializer(cipher=AesGcmCipher(OLD)).dumps_typed(VALUE)
    rotated = MsgpackSerializer(cipher=AesGcmCipher({"0": OLD, "2025": NEW}, primary="2025"))
    assert rotated.loads_typed(old_row) == VALUE
    new_row = rotated.dumps_typed(VALUE)
    assert MsgpackSerializer(cipher=AesGcmCipher({"2025": NEW})).loads_typed(new_row) == VALUE


def test_missing_single_key_id_says_it_is_zero_and_what_to_pass():
    old_row = MsgpackSerializer(cipher=AesGcmCipher(OLD)).dumps_typed(VALUE)
    rotated = MsgpackSerializer(cipher=AesGcmCipher({"k1": OLD, "k2": NEW}, primary="k2"))
    with pytest.raises(CorruptBlobError) as info:
        rotated.loads_typed(old_row)
    text = str(info.value)
    assert "key id '0', which this cipher does not hold (it holds ['k1', 'k2'])" in text
    assert "AesGcmCipher(key) (a single key) carry key id '0'" in text
    assert "AesGcmCipher({'0': old_key, 'k2': new_key}, primary='k2')" in text


def test_missing_named_key_id_says_to_keep_it_listed():
    row = MsgpackSerializer(cipher=AesGcmCipher({"k1": OLD})).dumps_typed(VALUE)
    with pytest.raises(CorruptBlobError) as info:
        MsgpackSerializer(cipher=AesGcmCipher(NEW)).loads_typed(row)
    assert "keep the old key listed under its id" in str(info.value)
    assert "AesGcmCipher({'k1': old_key, '0': new_key}, primary='0')" in str(info.value)

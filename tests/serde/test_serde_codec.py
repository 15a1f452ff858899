"""Compression threshold and encryption envelope (tag enforcement, tampering)."""

from __future__ import annotations

import hashlib
import hmac
import os

import pytest

from threadloom.checkpoint.serde import EncryptedSerializer, MsgpackSerializer
from threadloom.errors import CorruptBlobError, SerializationError


class ToyCipher:
    """XOR keystream + HMAC tag: authenticated enough to test the plumbing, not for use."""

    def __init__(self, key: bytes = b"k" * 32, name: str = "toy") -> None:
        self.key = key
        self.name = name

    def _stream(self, nonce: bytes, n: int) -> bytes:
        out = b""
        counter = 0
        while len(out) < n:
            out += hashlib.sha256(self.key + nonce + counter.to_bytes(8, "big")).digest()
            counter += 1
        return out[:n]

    def encrypt(self, plaintext: bytes) -> bytes:
        nonce = os.urandom(12)
        ct = bytes(a ^ b for a, b in zip(plaintext, self._stream(nonce, len(plaintext))))
        mac = hmac.new(self.key, nonce + ct, "sha256").digest()
        return nonce + mac + ct

    def decrypt(self, ciphertext: bytes) -> bytes:
        nonce, mac, ct = ciphertext[:12], ciphertext[12:44], ciphertext[44:]
        if not hmac.compare_digest(mac, hmac.new(self.key, nonce + ct, "sha256").digest()):
            raise ValueError("bad tag")
        return bytes(a ^ b for a, b in zip(ct, self._stream(nonce, len(ct))))


BIG = {"text": "lorem ipsum " * 200}
SMALL = {"text": "short"}


def test_compression_threshold():
    ser = MsgpackSerializer()
    assert ser.dumps_typed(SMALL)[0] == "msgpack"
    tag, data = ser.dumps_typed(BIG)
    assert tag == "msgpack+zstd" and len(data) < 1024
    assert ser.loads_typed((tag, data)) == BIG


def test_compression_configurable_and_off():
    assert MsgpackSerializer(compress_threshold=None).dumps_typed(BIG)[0] == "msgpack"
    assert MsgpackSerializer(compress_threshold=10_000).dumps_typed(BIG)[0] == "msgpack"
    assert (
        MsgpackSerializer(compress_threshold=4).dumps_typed(["aaaaaaaa"] * 10)[0] == "msgpack+zstd"
    )


def test_incompressible_payload_stays_plain():
    data = os.urandom(4096)
    assert MsgpackSerializer().dumps_typed([data])[0] == "msgpack"


def test_compressed_rows_readable_without_compression_configured():
    tag, data = MsgpackSerializer().dumps_typed(BIG)
    assert MsgpackSerializer(compress_threshold=None).loads_typed((tag, data)) == BIG


def test_decompression_bomb_is_refused():
    tag, data = MsgpackSerializer().dumps_typed({"z": "0" * 100_000})
    with pytest.raises(CorruptBlobError, match="limit"):
        MsgpackSerializer(max_decompressed=1000).loads_typed((tag, data))


@pytest.mark.parametrize("value", [SMALL, BIG, None, b"raw"])
def test_cipher_roundtrip_and_tags(value):
    ser = MsgpackSerializer(cipher=ToyCipher())
    tag, data = ser.dumps_typed(value)
    assert tag.endswith("+toy")
    assert b"short" not in data and b"lorem" not in data
    assert ser.loads_typed((tag, data)) == value


def test_cipher_rejects_plaintext_rows():
    plain = MsgpackSerializer().dumps_typed({"admin": True})
    for ser in (
        MsgpackSerializer(cipher=ToyCipher()),
        EncryptedSerializer(MsgpackSerializer(), ToyCipher()),
    ):
        with pytest.raises(SerializationError, match="refusing unencrypted"):
            ser.loads_typed(plain)
        with pytest.raises(SerializationError, match="refusing unencrypted"):
            ser.loads_typed(("null", b""))


def test_accept_plaintext_opt_in_reads_legacy_rows():
    plain = MsgpackSerializer().dumps_typed({"legacy": 1})
    ser = MsgpackSerializer(cipher=ToyCipher(), accept_plaintext=True)
    assert ser.loads_typed(plain) == {"legacy": 1}
    assert ser.dumps_typed({"new": 1})[0] == "msgpack+toy"  # still writes encrypted


def test_wrong_key_and_tampering_are_corrupt_blob():
    tag, data = MsgpackSerializer(cipher=ToyCipher()).dumps_typed(SMALL)
    with pytest.raises(CorruptBlobError, match="decrypt"):
        MsgpackSerializer(cipher=ToyCipher(key=b"x" * 32)).loads_typed((tag, data))
    flipped = data[:-1] + bytes([data[-1] ^ 1])
    with pytest.raises(CorruptBlobError):
        MsgpackSerializer(cipher=ToyCipher()).loads_typed((tag, flipped))


def test_inner_tag_is_authenticated():
    ser = MsgpackSerializer(cipher=ToyCipher())
    tag, data = ser.dumps_typed(b"\x81\xa1a\x01")  # bytes whose content is valid msgpack
    assert tag == "bytes+toy"
    with pytest.raises(CorruptBlobError, match="does not match its tag"):
        ser.loads_typed(("msgpack+toy", data))


def test_encrypted_rows_without_cipher_are_refused():
    tag, data = MsgpackSerializer(cipher=ToyCipher()).dumps_typed(SMALL)
    with pytest.raises(SerializationError, match="no cipher"):
        MsgpackSerializer().loads_typed((tag, data))
    with pytest.raises(SerializationError, match="encrypted with 'toy'"):
        MsgpackSerializer(cipher=ToyCipher(name="other")).loads_typed((tag, data))
    with pytest.raises(SerializationError):  # a LangGraph "+aes" row
        MsgpackSerializer(cipher=ToyCipher()).loads_typed(("msgpack+aes", data))


def test_encrypted_serializer_matches_builtin_cipher_and_langgraph_arg_order():
    cipher = ToyCipher()
    a = EncryptedSerializer(MsgpackSerializer(), cipher)
    b = EncryptedSerializer(cipher, MsgpackSerializer())  # LangGraph's order
    c = MsgpackSerializer(cipher=cipher)
    for writer in (a, b, c):
        row = writer.dumps_typed(BIG)
        assert row[0] == "msgpack+zstd+toy"
        assert all(reader.loads_typed(row) == BIG for reader in (a, b, c))


def test_encrypted_serializer_with_allowlist_keeps_cipher():
    import dataclasses

    @dataclasses.dataclass
    class Secret:
        v: int

    ser = EncryptedSerializer(MsgpackSerializer(), ToyCipher()).with_allowlist([Secret])
    tag, data = ser.dumps_typed(Secret(1))
    assert tag.endswith("+toy") and ser.loads_typed((tag, data)) == Secret(1)
    # already trusted: the same serializer (a subgraph's run checks this on every call)
    assert ser.with_allowlist([Secret]) is ser


def test_cipher_name_must_be_a_simple_suffix():
    with pytest.raises(ValueError):
        MsgpackSerializer(cipher=ToyCipher(name="a+b"))


def test_aes_gcm_cipher():
    pytest.importorskip("cryptography")
    from threadloom.checkpoint.serde import AesGcmCipher

    old = AesGcmCipher({"k1": b"1" * 32})
    rotated = AesGcmCipher({"k1": b"1" * 32, "k2": b"2" * 32}, primary="k2")
    row = MsgpackSerializer(cipher=old).dumps_typed(SMALL)
    assert row[0] == "msgpack+aesgcm"
    assert MsgpackSerializer(cipher=rotated).loads_typed(row) == SMALL
    new_row = MsgpackSerializer(cipher=rotated).dumps_typed(SMALL)
    with pytest.raises(CorruptBlobError, match="key id 'k2', which this cipher does not hold"):
        MsgpackSerializer(cipher=old).loads_typed(new_row)  # names the key (was "wrong key")


def test_aes_gcm_without_cryptography_says_how_to_install():
    try:
        import cryptography  # noqa: F401

        pytest.skip("cryptography is installed")
    except ImportError:
        pass
    from threadloom.checkpoint.serde import AesGcmCipher

    with pytest.raises(ImportError, match="pip install cryptography"):
        AesGcmCipher(b"1" * 32)


def test_langgraph_shaped_cipher_is_adapted():
    class LgCipher:  # LangGraph's CipherProtocol: encrypt -> (name, ct), decrypt(name, ct)
        def __init__(self):
            self.inner = ToyCipher(name="aes")

        def encrypt(self, plaintext):
            return "aes", self.inner.encrypt(plaintext)

        def decrypt(self, name, ciphertext):
            assert name == "aes"
            return self.inner.decrypt(ciphertext)

    ser = EncryptedSerializer(LgCipher(), MsgpackSerializer())
    tag, data = ser.dumps_typed(SMALL)
    assert tag == "msgpack+aes" and ser.loads_typed((tag, data)) == SMALL
    with pytest.raises(SerializationError, match="refusing unencrypted"):
        ser.loads_typed(MsgpackSerializer().dumps_typed(SMALL))

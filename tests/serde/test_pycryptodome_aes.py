"""``EncryptedSerializer.from_pycryptodome_aes`` (LangGraph's constructor, shown in
its persistence docs): same key sources and errors, reads the rows LangGraph
sealed, and threads encrypted that way survive a threadloom saver round trip."""

from __future__ import annotations

import pytest

pytest.importorskip("Crypto.Cipher.AES")

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LGEncrypted

from threadloom.checkpoint.serde import EncryptedSerializer
from threadloom.errors import CorruptBlobError, SerializationError

KEY = bytes(range(32))
VALUES = [{"a": [1, 2.5, None], "s": "text"}, [b"\x00raw", True], "plain"]


@pytest.mark.parametrize("value", VALUES)
def test_reads_what_langgraph_sealed(value) -> None:
    row = LGEncrypted.from_pycryptodome_aes(key=KEY).dumps_typed(value)
    assert row[0].endswith("+aes")
    assert EncryptedSerializer.from_pycryptodome_aes(key=KEY).loads_typed(row) == value


@pytest.mark.parametrize("value", VALUES)
def test_round_trip_binds_the_inner_tag(value) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    tag, sealed = serde.dumps_typed(value)
    assert tag.endswith("+aeseax") and serde.loads_typed((tag, sealed)) == value
    # LangGraph refuses our rows (another cipher name) instead of misreading them
    with pytest.raises(AssertionError, match="Unsupported cipher"):
        LGEncrypted.from_pycryptodome_aes(key=KEY).loads_typed((tag, sealed))
    with pytest.raises(CorruptBlobError):
        EncryptedSerializer.from_pycryptodome_aes(key=bytes(32)).loads_typed((tag, sealed))


def test_key_from_environment_and_checks(monkeypatch) -> None:
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    with pytest.raises(ValueError, match="LANGGRAPH_AES_KEY"):
        EncryptedSerializer.from_pycryptodome_aes()
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "0123456789abcdef")
    row = LGEncrypted.from_pycryptodome_aes().dumps_typed({"k": 1})
    assert EncryptedSerializer.from_pycryptodome_aes().loads_typed(row) == {"k": 1}
    with pytest.raises(ValueError, match="16, 24 or 32"):
        EncryptedSerializer.from_pycryptodome_aes(key=b"short")


def test_plaintext_rows_are_refused_unless_asked() -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    plain = ("msgpack", b"\x81\xa1k\x01")
    with pytest.raises(SerializationError, match="unencrypted"):
        serde.loads_typed(plain)
    lenient = EncryptedSerializer.from_pycryptodome_aes(key=KEY, accept_plaintext=True)
    assert lenient.loads_typed(plain) == {"k": 1}


def test_encrypted_thread_on_sqlite(tmp_path) -> None:
    from typing_extensions import TypedDict

    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.graph import START, StateGraph

    class State(TypedDict):
        note: str

    builder = StateGraph(State).add_node("n", lambda s: {"note": s["note"] + "!"})
    builder.add_edge(START, "n")
    cfg = {"configurable": {"thread_id": "secret"}}
    path = str(tmp_path / "enc.db")
    with SqliteSaver.from_conn_string(
        path, serde=EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    ) as saver:
        builder.compile(checkpointer=saver).invoke({"note": "hi"}, cfg)
    with SqliteSaver.from_conn_string(
        path, serde=EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    ) as saver:
        assert builder.compile(checkpointer=saver).get_state(cfg).values == {"note": "hi!"}
    assert b"hi!" not in open(path, "rb").read()

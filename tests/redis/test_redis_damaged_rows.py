"""Damaged values in a thread's Redis hashes (a checkpoint row, a ref row, a
blob, a pending-write row) raise CorruptBlobError naming the thread and
checkpoint, as a damaged SQLite/Postgres row does, never a bare ValueError or
TypeError from unpacking; a checkpoint the ``ck`` index names whose row is
gone raises too, instead of reading as the previous checkpoint or as an empty
thread (the next invoke would then start from nothing)."""

from __future__ import annotations

import operator
import random
import string
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest

from threadloom.checkpoint.redis import RedisSaver
from threadloom.errors import CorruptBlobError
from threadloom.graph import START, StateGraph

CFG = {"configurable": {"thread_id": "t1"}}


class S(TypedDict):
    msgs: Annotated[list, operator.add]
    big: str
    n: int


def _graph(saver: Any) -> Any:
    g = StateGraph(S)
    noise = "".join(random.Random(1).choices(string.ascii_letters, k=3000))  # a blob
    g.add_node("a", lambda s: {"msgs": ["x" * 300], "big": noise, "n": s.get("n", 0) + 1})
    g.add_edge(START, "a")
    return g.compile(checkpointer=saver)


def _fill(url: str, prefix: str) -> None:
    with RedisSaver.from_conn_string(url, key_prefix=prefix) as saver:
        app = _graph(saver)
        app.invoke({"msgs": ["u"]}, CFG)
        app.invoke({"msgs": ["v"]}, CFG)
        saver.put_writes(saver.get_tuple(CFG).config, [("msgs", ["w"])], "task-1")


def _set_all(client: Any, key: str, make: Callable[[bytes], bytes]) -> None:
    for field, value in client.hgetall(key).items():
        client.hset(key, field, make(value))


CASES: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "row garbage": ("row", lambda v: b"garbage"),
    "row truncated": ("row", lambda v: v[: len(v) // 2]),
    "row packed map": ("row", lambda v: v.split(b"\0", 1)[0] + b"\0" + ormsgpack.packb({"a": 1})),
    "blob garbage": ("blob", lambda v: b"\xc1garbage"),
    "blob packed [1, 2]": ("blob", lambda v: ormsgpack.packb([1, 2])),
    "ref garbage": ("ref", lambda v: b"\x92\x01"),
    "ref packed str": ("ref", lambda v: ormsgpack.packb("s")),
    "write packed int": ("w", lambda v: ormsgpack.packb(5)),
    "write packed [name, map, b'']": ("w", lambda v: ormsgpack.packb(["x", b"\x81\xa1a\x01", b""])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_values_raise_corrupt_blob_error(
    redis_url: str, redis_client: Any, key_prefix: str, case: str
) -> None:
    _fill(redis_url, key_prefix)
    part, make = CASES[case]
    _set_all(redis_client, f"{{{key_prefix}:t1}}:{part}", make)
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        with pytest.raises(CorruptBlobError) as info:
            for t in saver.list(CFG):
                t.pending_writes  # noqa: B018
        assert info.value.thread_id == "t1"
        assert info.value.checkpoint_id is not None
        assert saver.stats()["checkpoints"] == saver.stats("t1")["checkpoints"] == 6  # stats go on
        if part != "w":  # (the latest checkpoint's writes are the ones damaged)
            with pytest.raises(CorruptBlobError):
                _graph(saver).get_state(CFG)


def test_indexed_checkpoint_whose_row_is_gone_is_not_read_as_an_older_one(
    redis_url: str, redis_client: Any, key_prefix: str
) -> None:
    _fill(redis_url, key_prefix)
    key = f"{{{key_prefix}:t1}}:row"
    latest = max(redis_client.hkeys(key))
    redis_client.hdel(key, latest)
    cid = latest.split(b"\0", 1)[1].decode()
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        app = _graph(saver)
        for read in (
            lambda: saver.get_tuple(CFG),
            lambda: saver.get_tuple(
                {"configurable": {**CFG["configurable"], "checkpoint_id": cid}}
            ),
            lambda: app.get_state(CFG),
            lambda: list(saver.list(CFG)),
            lambda: app.invoke({"msgs": ["new"]}, CFG),
        ):
            with pytest.raises(CorruptBlobError, match="index names it") as info:
                read()
            assert (info.value.thread_id, info.value.checkpoint_id) == ("t1", cid)
        # an id the thread never had is still just absent
        other = {"configurable": {**CFG["configurable"], "checkpoint_id": "nope"}}
        assert saver.get_tuple(other) is None


def test_a_damaged_write_row_says_the_stored_value_is_damaged(
    redis_url: str, redis_client: Any, key_prefix: str
) -> None:
    """It said 'cannot be decoded (Input must be bytes, bytearray, memoryview)'."""
    _fill(redis_url, key_prefix)
    _set_all(redis_client, f"{{{key_prefix}:t1}}:w", CASES["write packed int"][1])
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        with pytest.raises(CorruptBlobError, match="task 'task-1'.*stored value is damaged"):
            saver.get_tuple(CFG).pending_writes  # noqa: B018

"""A checkpoint put with itself as parent is refused on every backend: the
history walks (diff chains, prune's ancestors) looped on it forever."""

from __future__ import annotations

import sqlite3

import pytest

from tests.savers.test_basic import cfg, put_chain
from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.errors import ConfigError, CorruptBlobError


async def test_a_checkpoint_cannot_be_its_own_parent(saver) -> None:
    await put_chain(saver, 1, thread="t")
    tup = await saver.get_tuple(cfg("t"))
    again = dict(empty_checkpoint(), id=tup.config["configurable"]["checkpoint_id"])
    with pytest.raises(ConfigError, match="itself as parent"):
        await saver.put(tup.config, again, {"step": 1}, {})
    assert len(await saver.list(cfg("t"))) == 1  # nothing stored, nothing replaced


def test_a_stored_diff_chain_that_loops_is_corrupt_not_a_hang(tmp_path) -> None:
    path = str(tmp_path / "loop.db")
    with SqliteSaver.from_conn_string(path) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for step in range(3):
            ckpt = empty_checkpoint()
            ckpt["channel_values"] = {"x": step}
            ckpt["channel_versions"] = {"x": step + 1}
            config = saver.put(config, ckpt, {"step": step}, {"x": step + 1})
    conn = sqlite3.connect(path)
    conn.execute("UPDATE tl_checkpoints SET parent_checkpoint_id = checkpoint_id")
    conn.commit()
    conn.close()
    with SqliteSaver.from_conn_string(path) as saver:
        with pytest.raises(CorruptBlobError, match="loops"):
            saver.get_tuple(config)

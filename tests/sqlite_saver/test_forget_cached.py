"""A restore into the saver's own connection (the sqlite3 backup API) changes
every row without moving ``total_changes`` or the connection's ``PRAGMA
data_version``, so the saver's kept rows cannot notice it; ``forget_cached()``
is the documented way to tell the saver (found in review)."""

from __future__ import annotations

import sqlite3

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import uuid6
from threadloom.checkpoint.sqlite import SqliteSaver

CFG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
VERSION = f"{1:032}.0.8147236863931789"


def put(saver: SqliteSaver, value: str) -> str:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6())
    cp["channel_values"] = {"a": value}
    cp["channel_versions"] = {"a": VERSION}
    saver.put(CFG, cp, {"step": 1}, {"a": VERSION})
    return cp["id"]


def test_forget_cached_after_a_restore_into_the_connection(tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "snap.db")) as other:
        snap_id = put(other, "snapshot")
    with SqliteSaver.from_conn_string(str(tmp_path / "live.db")) as saver:
        put(saver, "live")
        saver.get_tuple(CFG)
        saver.get_tuple(CFG)  # validated and kept
        src = sqlite3.connect(str(tmp_path / "snap.db"))
        src.backup(saver.conn)
        src.close()
        saver.forget_cached()
        got = saver.get_tuple(CFG)
        assert got.checkpoint["id"] == snap_id
        assert got.checkpoint["channel_values"] == {"a": "snapshot"}

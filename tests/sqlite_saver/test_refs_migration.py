"""Migration 4 (tl_refs keyed version before channel) upgrades a version-3 database
in place: same rows, same columns, readable state, and one put's refs share a leaf."""

from __future__ import annotations

import os
import sqlite3

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.schema import MIGRATIONS, MIGRATIONS_TABLE, REFS_BY_VERSION

V4 = MIGRATIONS.index(REFS_BY_VERSION)  # migrations applied before it
CHANNELS = ("a", "b", "c")


def _put_values(saver: SqliteSaver, steps: int) -> dict:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    versions: dict = dict.fromkeys(CHANNELS)
    values: dict = {}
    for i in range(steps):
        new = {ch: saver.get_next_version(versions[ch], None) for ch in CHANNELS}
        versions.update(new)
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        values = {ch: {"step": i, "text": os.urandom(300).hex()} for ch in CHANNELS}
        cp["channel_values"] = values
        cp["channel_versions"] = dict(versions)
        config = saver.put(config, cp, {"source": "loop", "step": i}, new)
    return values


def _old_database(path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(MIGRATIONS_TABLE)
    for v in range(V4):
        for stmt in MIGRATIONS[v]:
            conn.execute(stmt)
        conn.execute("INSERT INTO tl_migrations (v) VALUES (?)", (v + 1,))
    conn.close()


def _rows(path: str) -> list:
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute("SELECT * FROM tl_refs").fetchall())
    finally:
        conn.close()


def test_setup_rekeys_refs_with_nothing_lost(tmp_path) -> None:
    path = str(tmp_path / "v3.db")
    _old_database(path)
    old = SqliteSaver(sqlite3.connect(path, check_same_thread=False, isolation_level=None))
    old._owns = old.is_setup = True  # the version-3 schema, not migrated
    last = _put_values(old, 12)
    old.close()
    before = _rows(path)
    assert len(before) == 12 * len(CHANNELS)

    with SqliteSaver.from_conn_string(path) as saver:
        conn = saver.conn
        assert conn.execute("SELECT max(v) FROM tl_migrations").fetchone()[0] == len(MIGRATIONS)
        assert _rows(path) == before
        pk = conn.execute("SELECT name, pk FROM pragma_table_info('tl_refs') WHERE pk > 0")
        assert [n for n, _ in sorted(pk.fetchall(), key=lambda r: r[1])] == [
            "thread",
            "checkpoint_ns",
            "version",
            "channel",
        ]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "tl_refs_v4" not in names and "v_refs" in names
        saver.codec.states.clear()
        tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert tup.checkpoint["channel_values"] == last
        saver.is_setup = False
        saver.setup()  # a second setup() is a no-op
        assert _rows(path) == before
        last = _put_values(saver, 3)
        tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert tup.checkpoint["channel_values"] == last

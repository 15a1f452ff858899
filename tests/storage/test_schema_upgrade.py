"""SQLite: a database written by an earlier threadloom (schema before the ``tl_leases``
migration) is upgraded in place by ``setup()`` with nothing lost, and resumes."""

from __future__ import annotations

import sqlite3

from tests.storage.upgrade_scenario import (
    THREADS,
    cfg,
    graph,
    has_fork,
    resume_all,
    snapshot,
    write_history,
)
from threadloom.checkpoint.lease.sqlite import TABLE as LEASE_TABLE
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.checkpoint.sqlite.schema import MIGRATIONS, MIGRATIONS_TABLE
from threadloom.types import Command

# the schema version just before the lease table existed
OLD_VERSION = next(i for i, m in enumerate(MIGRATIONS) if LEASE_TABLE in m)


def _old_database(path: str) -> None:
    """Create the earlier schema exactly as that threadloom's setup() left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(MIGRATIONS_TABLE)
    for v in range(OLD_VERSION):
        for stmt in MIGRATIONS[v]:
            conn.execute(stmt)
        conn.execute("INSERT INTO tl_migrations (v) VALUES (?)", (v + 1,))
    conn.close()


def _old_saver(path: str) -> SqliteSaver:
    """A saver on the old schema that does not migrate it (as the earlier one did not know
    the newer migrations)."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    saver = SqliteSaver(conn)
    saver._owns = True
    saver.is_setup = True  # the old schema is all there is
    return saver


def _tables(path: str) -> tuple[list, list]:
    conn = sqlite3.connect(path)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        versions = conn.execute("SELECT v FROM tl_migrations ORDER BY v").fetchall()
    finally:
        conn.close()
    return schema, versions


def _rows(path: str) -> dict[str, list]:
    conn = sqlite3.connect(path)
    try:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'tl_%'"
            )
        ]
        return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall()) for n in names}
    finally:
        conn.close()


def test_setup_upgrades_an_old_database_with_nothing_lost(tmp_path):
    path = str(tmp_path / "old.db")
    _old_database(path)
    old = _old_saver(path)
    try:
        write_history(old)
        before = snapshot(old)
    finally:
        old.close()
    schema, versions = _tables(path)
    assert versions == [(v,) for v in range(1, OLD_VERSION + 1)]
    assert "tl_leases" not in {name for _, name, _ in schema}
    raw_before = _rows(path)

    with SqliteSaver.from_conn_string(path) as saver:  # runs setup()
        upgraded_schema, upgraded = _tables(path)
        assert upgraded == [(v,) for v in range(1, len(MIGRATIONS) + 1)]
        assert "tl_leases" in {name for _, name, _ in upgraded_schema}
        after_rows = _rows(path)
        raw_before.pop("tl_migrations")
        for table, rows in raw_before.items():  # raw rows untouched by the migration
            assert after_rows[table] == rows, table
        assert snapshot(saver) == before
        for thread, snap in before.items():
            assert snap["next"] and snap["interrupts"], thread  # each waits on an interrupt
            assert any(t[4] for t in snap["tuples"]), thread  # pending writes survived
            assert len(snap["history"]) > 10 and has_fork(snap), thread
        assert raw_before["tl_blobs"] and any(r[8] > 1 for r in raw_before["tl_refs"])  # lists

        # a second setup() is a no-op: same schema, same versions, same rows
        saver.is_setup = False
        saver.setup()
        assert _tables(path) == (upgraded_schema, upgraded)
        assert _rows(path) == after_rows

        # resume (leases on: the upgraded schema has the lease table) and continue
        finals = resume_all(saver)
        for thread, values in finals.items():
            assert f"{thread}-after-upgrade" in values["answers"]
            assert f"{thread}-second" in values["answers"]
            assert (
                values["log"][: len(before[thread]["values"]["log"])]
                == (before[thread]["values"]["log"])
            )
            assert "post-upgrade run" in values["log"]
        assert not _rows(path)["tl_leases"]  # every lease released


async def test_async_setup_upgrades_an_old_database(tmp_path):
    path = str(tmp_path / "old.db")
    _old_database(path)
    old = _old_saver(path)
    try:
        write_history(old)
        before = {t: list(old.list(cfg(t))) for t in THREADS}
    finally:
        old.close()
    async with AsyncSqliteSaver.from_conn_string(path) as saver:  # runs setup()
        assert _tables(path)[1] == [(v,) for v in range(1, len(MIGRATIONS) + 1)]
        for t in THREADS:
            assert [x async for x in saver.alist(cfg(t))] == before[t], t
        await saver.setup()  # idempotent
        g = graph(saver)
        out = await g.ainvoke(Command(resume="async-answer"), cfg("t-a"))
        assert "async-answer" in out["answers"]


def _versions(path: str) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [v for (v,) in conn.execute("SELECT v FROM tl_migrations ORDER BY v")]
    finally:
        conn.close()


def test_migrations_apply_all_or_nothing(tmp_path, monkeypatch) -> None:
    """A migration failing half-way leaves the file as it was: it used to commit each
    migration on its own, so the file ended at a version whose layout it lacked."""
    import threadloom.checkpoint.sqlite.executor as executor_mod

    path = str(tmp_path / "old.db")
    _old_database(path)
    broken = [*MIGRATIONS[:-1], ("SELECT no_such_column FROM tl_checkpoints",)]
    monkeypatch.setattr(executor_mod, "MIGRATIONS", broken)
    try:
        SqliteSaver.from_conn_string(path).__enter__()
    except Exception as exc:  # the failing statement is named
        assert "no_such_column" in str(exc)
    else:
        raise AssertionError("the broken migration did not fail")
    assert _versions(path) == list(range(1, OLD_VERSION + 1))
    monkeypatch.undo()
    with SqliteSaver.from_conn_string(path) as saver:  # and it upgrades once fixed
        assert saver.get_tuple(cfg("nobody")) is None
    assert _versions(path) == list(range(1, len(MIGRATIONS) + 1))


def test_a_pre_release_layout_is_refused_untouched(tmp_path) -> None:
    """Builds from before 2026-11-21 wrote version 1 with thread ids in every row and no
    tl_threads; opening such a file migrated 2 and 3, then failed on 4 with 'no such
    column', leaving a file no version could open."""
    import pytest

    from threadloom.errors import StorageError

    path = str(tmp_path / "pre.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(MIGRATIONS_TABLE)
    conn.execute(
        "CREATE TABLE tl_checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL,"
        " checkpoint_id TEXT NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))"
    )
    conn.execute("INSERT INTO tl_checkpoints VALUES ('t', '', 'c1')")
    conn.execute("INSERT INTO tl_migrations (v) VALUES (1)")
    conn.close()
    with pytest.raises(StorageError, match="pre-release threadloom build.*nothing was changed"):
        SqliteSaver.from_conn_string(path).__enter__()
    assert _versions(path) == [1]
    conn = sqlite3.connect(path)
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert conn.execute("SELECT count(*) FROM tl_checkpoints").fetchone()[0] == 1
    conn.close()
    assert tables == {"tl_migrations", "tl_checkpoints"}

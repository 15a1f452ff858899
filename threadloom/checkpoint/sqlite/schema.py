"""SQLite schema as versioned migrations.

``MIGRATIONS[i]`` brings a database from version ``i`` to ``i + 1``; the
applied version lives in ``tl_migrations``. Future schema changes APPEND a
migration, never edit one. Tables are prefixed ``tl_`` so a file can also hold
LangGraph's ``checkpoints``/``writes`` tables (migration tools read both).
"""

from __future__ import annotations

from threadloom.checkpoint.lease.sqlite import TABLE as LEASE_TABLE
from threadloom.checkpoint.sqlite.ttl import TABLE as CLOCK_TABLE

__all__ = ["MIGRATIONS", "MIGRATIONS_TABLE", "PRAGMAS"]

MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS tl_migrations (v INTEGER PRIMARY KEY)"

_VIEW = (
    "CREATE VIEW IF NOT EXISTS v_{name} AS SELECT t.thread_id AS thread_id, x.*"
    " FROM tl_{name} x JOIN tl_threads t ON t.id = x.thread"
)

# 4: ref rows keyed version before channel. The channels a step writes usually
# share its version counter, so one put's ref rows land in one b-tree leaf
# instead of one leaf per channel (5 channels: ~8 WAL pages per commit -> ~3).
# Lookups give the whole key either way. SQLite cannot alter a primary key:
# copy into a new table (same columns, same order) and swap, inside the
# migration's transaction.
REFS_BY_VERSION = (
    "DROP VIEW IF EXISTS v_refs",
    """CREATE TABLE tl_refs_v4 (
            thread INTEGER NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            channel TEXT NOT NULL,
            version TEXT NOT NULL,
            kind INTEGER NOT NULL,
            tag TEXT NOT NULL,
            data BLOB NOT NULL,
            hashes BLOB NOT NULL,
            length INTEGER NOT NULL DEFAULT 0,
            logical INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (thread, checkpoint_ns, version, channel)
        ) WITHOUT ROWID""",
    "INSERT INTO tl_refs_v4 SELECT thread, checkpoint_ns, channel, version, kind, tag, data,"
    " hashes, length, logical FROM tl_refs",
    "DROP TABLE tl_refs",
    "ALTER TABLE tl_refs_v4 RENAME TO tl_refs",
    _VIEW.format(name="refs"),
)

MIGRATIONS: list[tuple[str, ...]] = [
    (
        # one row per checkpoint: its record (keyframe or diff) and metadata
        # thread ids are stored once; other tables hold the small integer
        """CREATE TABLE IF NOT EXISTS tl_threads (
            id INTEGER PRIMARY KEY,
            thread_id TEXT NOT NULL UNIQUE
        )""",
        """CREATE TABLE IF NOT EXISTS tl_checkpoints (
            thread INTEGER NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            checkpoint_id TEXT NOT NULL,
            parent_checkpoint_id TEXT,
            tag TEXT NOT NULL,
            data BLOB NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            run_id TEXT,
            created_at INTEGER NOT NULL DEFAULT (strftime('%s', 'now')),
            PRIMARY KEY (thread, checkpoint_ns, checkpoint_id)
        ) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS tl_checkpoints_run ON tl_checkpoints (run_id)"
        " WHERE run_id IS NOT NULL",
        # (thread, ns, channel, version) -> blob hashes of a large value / list
        """CREATE TABLE IF NOT EXISTS tl_refs (
            thread INTEGER NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            channel TEXT NOT NULL,
            version TEXT NOT NULL,
            kind INTEGER NOT NULL,
            tag TEXT NOT NULL,
            data BLOB NOT NULL,
            hashes BLOB NOT NULL,
            length INTEGER NOT NULL DEFAULT 0,
            logical INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (thread, checkpoint_ns, channel, version)
        ) WITHOUT ROWID""",
        # content-addressed values shared by every thread
        """CREATE TABLE IF NOT EXISTS tl_blobs (
            hash BLOB PRIMARY KEY,
            tag TEXT NOT NULL,
            data BLOB NOT NULL,
            children BLOB NOT NULL,
            refs INTEGER NOT NULL DEFAULT 0
        )""",
        # one row per (checkpoint, task): all of the task's pending writes
        """CREATE TABLE IF NOT EXISTS tl_writes (
            thread INTEGER NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            task_path TEXT NOT NULL DEFAULT '',
            data BLOB NOT NULL,
            hashes BLOB NOT NULL,
            PRIMARY KEY (thread, checkpoint_ns, checkpoint_id, task_id)
        ) WITHOUT ROWID""",
        # reads go through views that put the thread id text back
        *(_VIEW.format(name=name) for name in ("checkpoints", "refs", "writes")),
    ),
    (LEASE_TABLE,),  # 2: thread leases (checkpoint/lease/sqlite.py)
    (CLOCK_TABLE,),  # 3: per-thread TTL clocks (sqlite/ttl.py)
    REFS_BY_VERSION,  # 4: tl_refs keyed (thread, ns, version, channel)
]

PRAGMAS = ("PRAGMA busy_timeout = {busy_timeout}", "PRAGMA synchronous = {synchronous}")

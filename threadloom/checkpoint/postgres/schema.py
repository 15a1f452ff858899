"""PostgreSQL schema: the versioned migrations and what ``setup()`` runs
(the SQL of the operations: postgres/queries.py).

Tables (all in one schema, ``public`` unless ``schema=`` says otherwise):

``checkpoints``        one row per checkpoint: body, metadata (JSON text), parent, run_id
``checkpoint_refs``    (thread, ns, channel, version) -> where the value lives
                       (inline bytes, one blob, or list chunks)
``checkpoint_blobs``   content-addressed bytes keyed by hash, written once
                       (``ON CONFLICT DO NOTHING``; compressed by ``blobpack``
                       when that pays), shared by every thread, with
                       a reference count (in ``checkpoint_blob_refs``) so retention
                       can drop what nobody holds
``checkpoint_writes``  pending writes against a checkpoint, one row per task
``checkpoint_migrations``  applied migration versions

Migrations run in ONE transaction under ``pg_advisory_xact_lock``: several
processes may call ``setup()`` at once (one applies, the others wait and find
nothing left to do), and ``setup()`` works inside a caller's transaction
(tenant provisioning). No ``CREATE INDEX CONCURRENTLY`` (it cannot run in a
transaction); an index added by a later migration to a big table therefore
blocks writes to it while it builds: such migrations are announced in
docs/postgres.md.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Generator
from typing import Any

from threadloom.checkpoint.lease.postgres import TABLE as LEASE_TABLE
from threadloom.checkpoint.postgres.idpack import (
    SQL_PACK_ORDERED,
    sql_pack,
    sql_pack_version,
    sql_unpack,
)
from threadloom.checkpoint.postgres.metapack import sql_pack as sql_pack_meta
from threadloom.checkpoint.postgres.stmt import Stmt
from threadloom.checkpoint.postgres.ttl import TABLE as CLOCK_TABLE
from threadloom.errors import ConfigError, StorageError

__all__ = ["LEASE_TABLE", "MIGRATIONS", "as_do_block", "lock_key", "quote_ident", "setup_flow"]

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")

MIGRATIONS: list[str] = [
    # 0: the version table itself (created by setup_flow before reading it)
    "CREATE TABLE IF NOT EXISTS {s}.checkpoint_migrations (v INTEGER PRIMARY KEY)",
    # 1: checkpoints; PK (thread, ns, id) also serves "latest" (backward index scan)
    """CREATE TABLE IF NOT EXISTS {s}.checkpoints (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        parent_checkpoint_id TEXT,
        tag TEXT NOT NULL,
        data BYTEA NOT NULL,
        metadata JSONB NOT NULL DEFAULT '{{}}',
        run_id TEXT,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
    )""",
    # 2: where each (channel, version) value lives
    """CREATE TABLE IF NOT EXISTS {s}.checkpoint_refs (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        channel TEXT NOT NULL,
        version TEXT NOT NULL,
        kind SMALLINT NOT NULL,
        tag TEXT NOT NULL,
        data BYTEA NOT NULL,
        hashes BYTEA NOT NULL,
        length BIGINT NOT NULL DEFAULT 0,
        logical BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
    )""",
    # 3: content-addressed blobs, shared across threads, reference counted
    """CREATE TABLE IF NOT EXISTS {s}.checkpoint_blobs (
        hash BYTEA PRIMARY KEY,
        tag TEXT NOT NULL,
        data BYTEA NOT NULL,
        children BYTEA NOT NULL,
        refs BIGINT NOT NULL DEFAULT 0
    )""",
    # 4: pending writes, one row per task (values inline or as held blob hashes)
    """CREATE TABLE IF NOT EXISTS {s}.checkpoint_writes (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        task_path TEXT NOT NULL DEFAULT '',
        data BYTEA NOT NULL,
        hashes BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id)
    )""",
    # 5: metadata filters (`metadata @> ...`) and delete_for_runs
    "CREATE INDEX IF NOT EXISTS checkpoints_metadata_idx"
    " ON {s}.checkpoints USING GIN (metadata jsonb_path_ops)",
    "CREATE INDEX IF NOT EXISTS checkpoints_run_id_idx"
    " ON {s}.checkpoints (run_id) WHERE run_id IS NOT NULL",
    # thread leases (checkpoint/lease/postgres.py)
    LEASE_TABLE,
    # per-thread TTL clocks (postgres/ttl.py)
    CLOCK_TABLE,
    # 9-11: reference counts move to their own narrow table. Counting in the blob
    # row made every count change copy the whole ~600-byte row (value included):
    # a 1,000-turn conversation left ~3x its live blob bytes as dead row copies.
    # The blob rows are now written once and never updated.
    "CREATE TABLE IF NOT EXISTS {s}.checkpoint_blob_refs ("
    " hash BYTEA PRIMARY KEY, refs BIGINT NOT NULL DEFAULT 0)",
    "INSERT INTO {s}.checkpoint_blob_refs (hash, refs)"
    " SELECT hash, refs FROM {s}.checkpoint_blobs ON CONFLICT (hash) DO NOTHING",
    "ALTER TABLE {s}.checkpoint_blobs DROP COLUMN IF EXISTS refs",
    # 12: no GIN index on metadata. It cost ~45 bytes per checkpoint (a fifth of
    # the table's size) to speed up only filters that name no thread; a filter
    # within a thread reads that thread's rows through the primary key anyway
    # (LangGraph's PostgresSaver has no such index either)
    "DROP INDEX IF EXISTS {s}.checkpoints_metadata_idx",
    # 13: a blob too big to sit in a row with others (a sealed, already
    # compressed list chunk, ~2 KB) stays in its row instead of TOAST (two TOAST
    # rows and index entries per value); only values over ~8 KB move out of line
    "ALTER TABLE {s}.checkpoint_blobs ALTER COLUMN data SET STORAGE MAIN",
    # 14: checkpoint and task ids of pending writes as 16 bytes, not 37 (idpack):
    # 40 bytes less per write in the heap and again in the primary key
    "ALTER TABLE {s}.checkpoint_writes"
    " ALTER COLUMN checkpoint_id TYPE BYTEA USING " + sql_pack("checkpoint_id") + ","
    " ALTER COLUMN task_id TYPE BYTEA USING " + sql_pack("task_id"),
    # 15: channel versions of refs packed (idpack): 8 bytes less per ref, and new
    # versions appended in order, so the primary key's pages fill instead of
    # splitting half-empty
    "ALTER TABLE {s}.checkpoint_refs ALTER COLUMN version TYPE BYTEA USING "
    + sql_pack_version("version"),
    # 16: a checkpoint's parent id packed like the ids of pending writes (16 bytes
    # for a uuid, not 37); the ancestors query unpacks it to follow the chain
    "ALTER TABLE {s}.checkpoints ALTER COLUMN parent_checkpoint_id TYPE BYTEA USING "
    + sql_pack("parent_checkpoint_id"),
    # 17: room on each lease page for a thread's row to be updated in place (HOT:
    # no new index entry); a released lease is expired, not deleted (lease/postgres.py)
    "ALTER TABLE {s}.tl_leases SET (fillfactor = 50)",
    # 18: metadata as JSON text (`json`), not `jsonb`: the saver writes compact
    # JSON, and `{"step":3,"source":"loop","parents":{}}` takes 43 bytes as text
    # but 66 as jsonb. Filters cast to jsonb (`metadata::jsonb @> ...`); they read
    # one thread's rows through the primary key anyway (no GIN index since 12)
    "ALTER TABLE {s}.checkpoints ALTER COLUMN metadata DROP DEFAULT,"
    " ALTER COLUMN metadata TYPE JSON USING metadata::json,"
    " ALTER COLUMN metadata SET DEFAULT '{{}}'",
    # 19: checkpoint ids (and parent ids) packed in order (idpack.pack_ordered):
    # 17 bytes instead of 37 for a uuid, in the heap and again in the primary key,
    # and byte order is the ids' order, so ORDER BY and list cursors are unchanged
    SQL_PACK_ORDERED + ";"
    " ALTER TABLE {s}.checkpoints"
    " ALTER COLUMN checkpoint_id TYPE BYTEA USING pg_temp.tl_pack_ordered(checkpoint_id),"
    " ALTER COLUMN parent_checkpoint_id TYPE BYTEA USING pg_temp.tl_pack_ordered("
    + sql_unpack("parent_checkpoint_id").replace("{", "{{").replace("}", "}}")
    + ")",
    # 20: task paths of pending writes packed (idpack.pack_path: the usual
    # "~__pregel_pull, " prefix as one character). Old paths are read as they
    # are; the few that start with a code character get the escape first
    "UPDATE {s}.checkpoint_writes SET task_path = chr(3) || task_path"
    " WHERE left(task_path, 1) IN (chr(1), chr(2), chr(3))",
    # 21: metadata packed (metapack: the usual keys as one control character each,
    # `{"source":"loop","step":3,"parents":{}}` stored in 5 bytes instead of 43), as
    # text; filters unpack it in SQL (`metadata::jsonb` on the unpacked text)
    "ALTER TABLE {s}.checkpoints ALTER COLUMN metadata DROP DEFAULT,"
    " ALTER COLUMN metadata TYPE TEXT USING "
    + sql_pack_meta("metadata::text").replace("{", "{{").replace("}", "}}")
    + ", ALTER COLUMN metadata SET DEFAULT '{{}}'",
    # 22: the usual record tag stored as NULL (idpack.packed_ckpt); no rewrite
    "ALTER TABLE {s}.checkpoints ALTER COLUMN tag DROP NOT NULL",
    # 23: lease pages filled again: 17's room for in-place updates serves nothing
    # now (a released lease is deleted, the fence extends it every TTL/3 at most)
    "ALTER TABLE {s}.tl_leases RESET (fillfactor)",
    # 24: the refs' primary key ordered (thread, ns, version, channel): versions grow
    # within a thread whatever the channel, so new keys land at the index's right
    # end (pages fill to 90%) instead of in each channel's run (pages split in half:
    # 0.24 -> 0.17 MB at 1,000 turns). Every lookup names all four columns, and
    # ON CONFLICT infers the key from its columns, not their order
    "ALTER TABLE {s}.checkpoint_refs DROP CONSTRAINT checkpoint_refs_pkey,"
    " ADD CONSTRAINT checkpoint_refs_pkey"
    " PRIMARY KEY (thread_id, checkpoint_ns, version, channel)",
    # 25: the ascending keys fill their index pages. A B-tree splits its rightmost
    # page (and a page taking ascending keys) at its fillfactor: the default 90 leaves
    # a tenth of each such page for entries that come later in the middle, which
    # these keys rarely get (ids and versions grow within a thread; a row is seldom
    # rewritten). A page that does fill splits as before. No rebuild: pages split
    # from now on fill (1,000 turns: the three indexes 0.73 -> 0.70 MB)
    "ALTER INDEX {s}.checkpoints_pkey SET (fillfactor = 100);"
    " ALTER INDEX {s}.checkpoint_refs_pkey SET (fillfactor = 100);"
    " ALTER INDEX {s}.checkpoint_writes_pkey SET (fillfactor = 100)",
    # 26: counts keyed by a bigint blob id, not the 16-byte hash: each blob row
    # carries its id (from an identity sequence; an insert that finds the hash
    # there already burns a value, harmless), and the count table's row and
    # primary-key entry shrink (56 -> 40 and 32 -> 16 bytes). Statements map
    # hash -> id through the blob's primary key; nothing looks a blob up by id,
    # so it has no index. Existing blobs get ids here, their counts carried over
    "ALTER TABLE {s}.checkpoint_blobs ADD COLUMN id BIGINT GENERATED BY DEFAULT AS IDENTITY;"
    " CREATE TABLE {s}.checkpoint_blob_counts (id BIGINT PRIMARY KEY, refs BIGINT NOT NULL DEFAULT 0);"
    " INSERT INTO {s}.checkpoint_blob_counts (id, refs)"
    " SELECT b.id, r.refs FROM {s}.checkpoint_blob_refs r JOIN {s}.checkpoint_blobs b USING (hash);"
    " DROP TABLE {s}.checkpoint_blob_refs;"
    " ALTER TABLE {s}.checkpoint_blob_counts RENAME TO checkpoint_blob_refs;"
    " ALTER INDEX {s}.checkpoint_blob_counts_pkey RENAME TO checkpoint_blob_refs_pkey",
]


def quote_ident(name: str) -> str:
    """A schema name as a quoted SQL identifier, after checking it is a plain name."""
    if not _SCHEMA_NAME.match(name):
        raise ConfigError(
            f"invalid Postgres schema name {name!r}: use letters, digits, _ or $ (max 63)"
        )
    return '"' + name + '"'


def lock_key(schema: str) -> int:
    """The advisory lock id that serializes migrations of one schema."""
    return zlib.crc32(f"threadloom.migrations:{schema}".encode()) - (1 << 31)


# LangGraph's PostgresSaver uses the same table names; its `checkpoints` has a
# JSONB `checkpoint` column, ours does not
_LANGGRAPH_TABLES = """
    SELECT count(*) FROM information_schema.columns
    WHERE table_schema = %s AND table_name = 'checkpoints' AND column_name = 'checkpoint'"""


# the tables the migrations create or alter ("{s}.name"; index names match no table)
_OWN_TABLES = sorted(set(re.findall(r"\{s\}\.(\w+)", "\n".join(MIGRATIONS))))

# threadloom's tables in the schema the current role cannot ALTER (it is not, and
# does not act as, their owner): a migration would fail on them
_NOT_OURS = """
    SELECT c.relname, pg_get_userbyid(c.relowner), current_user FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)
      AND NOT pg_has_role(c.relowner, 'USAGE')
    ORDER BY c.relname"""


def setup_flow(schema: str) -> Generator[list[Stmt], list[Any], int]:
    """Apply pending migrations; return the schema version now in place.

    DDL runs only when something is missing: the schema, the version table and
    the migrations are looked up first, so on a migrated schema ``setup()``
    needs no more than a role with USAGE on it and SELECT on the version table
    (a least-privilege app role, or a read-only transaction, can call it at every
    start). ``CREATE ... IF NOT EXISTS`` alone was not enough: Postgres checks the
    CREATE privilege before it finds the object exists.

    A schema that needs migrations whose tables the current role does not own
    (an app role with DML rights only) is refused up front with what to do,
    rather than with the server's "must be owner of table ..." from the middle
    of a migration.

    Raises:
        StorageError: the database holds a newer schema than this threadloom
            knows, or needs migrations the current role cannot run.
    """
    s = quote_ident(schema)
    first = [
        Stmt("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),)),
        Stmt("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,), "one"),
        Stmt("SELECT to_regclass(%s) IS NOT NULL", (f"{s}.checkpoint_migrations",), "one"),
        Stmt(_LANGGRAPH_TABLES, (schema,), "one"),
    ]
    _, (has_schema,), (has_versions,), (langgraph,) = yield first
    if langgraph:
        raise StorageError(
            f"schema {schema!r} holds LangGraph's checkpoint tables (same names, another "
            "layout): give threadloom its own schema, e.g. PostgresSaver(..., schema='threadloom')"
        )
    second = []
    if not has_schema and schema != "public":
        second.append(Stmt(f"CREATE SCHEMA IF NOT EXISTS {s}"))
    if not has_versions:
        second.append(Stmt(MIGRATIONS[0].format(s=s)))
    second.append(Stmt(_NOT_OURS, (schema, _OWN_TABLES), "all"))
    second.append(Stmt(f"SELECT coalesce(max(v), -1) FROM {s}.checkpoint_migrations", (), "one"))
    results = yield second
    not_ours, current = results[-2], results[-1][0]
    latest = len(MIGRATIONS) - 1
    if current > latest:
        raise StorageError(
            f"schema {schema!r} is at migration {current} but this threadloom knows only "
            f"up to {latest}: upgrade threadloom"
        )
    if current < latest and not_ours:
        owners = ", ".join(sorted({repr(owner) for _, owner, _ in not_ours}))
        raise StorageError(
            f"schema {schema!r} needs migration {current} -> {latest}, and role "
            f"{not_ours[0][2]!r} cannot alter its tables (it does not own "
            f"{', '.join(name for name, _, _ in not_ours)}): their owner ({owners}), a "
            "member of the owning role, or a superuser must run saver.setup() once with this "
            "version of threadloom (Postgres grants no right to alter another role's table); "
            "after that, DML-only roles can call setup() at every start"
        )
    batch = []
    for v in range(current + 1, len(MIGRATIONS)):
        batch.append(Stmt(as_do_block(MIGRATIONS[v].format(s=s))))
        batch.append(Stmt(f"INSERT INTO {s}.checkpoint_migrations (v) VALUES (%s)", (v,)))
    if batch:
        yield batch
    return latest


def as_do_block(ddl: str) -> str:
    """``ddl`` run inside an anonymous ``DO`` block, so its command tag is ``DO``.

    psycopg (3.3) drops its whole prepared-statement cache when a result's tag
    is ``ALTER``/``DROP`` and sends ``DEALLOCATE ALL`` only after the *next*
    statement. In a pipeline (setup's batch is one) that next statement is the
    following transaction's ``BEGIN``, already re-prepared by then: the server
    forgets it, psycopg does not, and every later save on a caller's
    ``prepare_threshold=0`` connection fails with "prepared statement _pg3_N
    does not exist". The server itself re-plans prepared statements after DDL,
    so hiding the tag loses nothing.
    """
    return f"DO $threadloom$ BEGIN {ddl}; END $threadloom$"

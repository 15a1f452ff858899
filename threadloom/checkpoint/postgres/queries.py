"""The SQL text of every operation of the Postgres saver (the tables, their
migrations and ``setup()``: postgres/schema.py)."""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.postgres.schema import quote_ident

__all__ = ["BLOB_DATA", "SQL", "columns"]


BLOB_DATA = "CASE WHEN {b}data = '' AND {b}tag IN ('~M', '~N') THEN {b}children ELSE {b}data END"
"""A blob's stored ``data`` in SQL. A manifest's data is its children (the hashes
it lists): the insert stores them once, in ``children``, and leaves ``data``
empty (only for the usual manifest tags with identical, non-empty bytes, so no
other row reads differently)."""


def _blob_data(alias: str = "") -> str:
    return BLOB_DATA.format(b=alias)


_STATEMENTS: dict[str, str] = {
    "select_ckpt": """SELECT {ckpt_cols} FROM {ckpt}""",
    "select_refs": """SELECT {ref_cols} FROM {refs}""",
    "select_writes": """SELECT {write_cols} FROM {writes}""",
    "insert_blobs": """
            WITH ins AS (
                INSERT INTO {blobs} (hash, tag, data, children)
                SELECT h, t, CASE WHEN d = c AND t IN ('~M', '~N') THEN ''::bytea ELSE d END, c
                FROM unnest(%s::bytea[], %s::text[], %s::bytea[], %s::bytea[]) AS u(h, t, d, c)
                ON CONFLICT (hash) DO NOTHING RETURNING hash, id
            ), cnt AS (
                INSERT INTO {counts} (id) SELECT id FROM ins ON CONFLICT (id) DO NOTHING
            )
            SELECT hash FROM ins""",
    # insert refs not present yet; each inserted row adds one reference per
    # hash occurrence (blobs of this batch were inserted by the statement
    # before, so they are visible here). The last parameter, every hash the
    # refs hold, bounds the count update to an index lookup of those rows
    # (the planner cannot know how few rows `occ` has)
    "insert_refs": """
            WITH ins AS (
                INSERT INTO {refs} ({ref_cols})
                SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bytea[],
                    %s::smallint[], %s::text[], %s::bytea[], %s::bytea[], %s::bigint[],
                    %s::bigint[])
                ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
                RETURNING channel, version, hashes
            ), occ AS (
                SELECT substring(ins.hashes FROM i * 16 + 1 FOR 16) AS hash, count(*) AS n
                FROM ins CROSS JOIN LATERAL generate_series(0, length(ins.hashes) / 16 - 1) i
                GROUP BY 1
            ), upd AS (
                UPDATE {counts} c SET refs = c.refs + occ.n
                FROM occ JOIN {blobs} b ON b.hash = occ.hash
                WHERE c.id = b.id AND b.hash = ANY(%s::bytea[])
            )
            SELECT channel, version FROM ins""",
    "upsert_ckpt": """
            INSERT INTO {ckpt} ({ckpt_cols_raw})
            VALUES (%s, %s, %s, %s::bytea, %s, %s, %s, %s)
            ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
                parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, tag = EXCLUDED.tag,
                data = EXCLUDED.data, metadata = EXCLUDED.metadata, run_id = EXCLUDED.run_id""",
    "upsert_ref": """
            INSERT INTO {refs} ({ref_cols})
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE SET
                kind = EXCLUDED.kind, tag = EXCLUDED.tag, data = EXCLUDED.data,
                hashes = EXCLUDED.hashes, length = EXCLUDED.length, logical = EXCLUDED.logical""",
    "upsert_writes": """
            INSERT INTO {writes} ({write_cols})
            SELECT * FROM unnest(%s::text[], %s::text[], %s::bytea[], %s::bytea[], %s::text[],
                %s::bytea[], %s::bytea[])
            ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id) DO UPDATE SET
                task_path = EXCLUDED.task_path, data = EXCLUDED.data, hashes = EXCLUDED.hashes""",
    "ancestors": """
            WITH RECURSIVE chain AS (
                SELECT c.*, 0 AS depth FROM {ckpt} c
                WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s
                UNION ALL
                SELECT p.*, chain.depth + 1 FROM {ckpt} p JOIN chain
                    ON p.thread_id = chain.thread_id AND p.checkpoint_ns = chain.checkpoint_ns
                    AND p.checkpoint_id = chain.parent_checkpoint_id
                WHERE chain.depth < %s
            )
            SELECT {ckpt_cols} FROM chain ORDER BY depth""",
    "adjust": """
            UPDATE {counts} c SET refs = c.refs + d.delta
            FROM unnest(%s::bytea[], %s::bigint[]) AS d(hash, delta)
            JOIN {blobs} b ON b.hash = d.hash WHERE c.id = b.id""",
    "drop_unreferenced": """
            WITH gone AS (
                DELETE FROM {counts} c USING {blobs} k
                WHERE c.id = k.id AND k.hash = ANY(%s::bytea[]) AND c.refs <= 0 RETURNING k.hash
            )
            DELETE FROM {blobs} b USING gone WHERE b.hash = gone.hash
            RETURNING b.hash, b.tag, {bdata}, b.children""",
    "load_blob_counts": """
            SELECT b.hash, b.tag, {bdata}, b.children, coalesce(c.refs, 0)
            FROM {blobs} b LEFT JOIN {counts} c ON c.id = b.id
            WHERE b.hash = ANY(%s::bytea[])""",
    "lock_blobs": """
            SELECT 1 FROM {blobs} WHERE hash = ANY(%s::bytea[]) ORDER BY hash FOR UPDATE""",
    "load_blobs": """
            SELECT hash, tag, {data}, children FROM {blobs} WHERE hash = ANY(%s::bytea[])""",
    "thread_blobs": """
            WITH RECURSIVE held(hash) AS (
                SELECT substring(r.hashes FROM i * 16 + 1 FOR 16) FROM (
                    SELECT hashes FROM {refs} WHERE thread_id = %s
                    UNION ALL SELECT hashes FROM {writes} WHERE thread_id = %s
                ) r CROSS JOIN LATERAL generate_series(0, length(r.hashes) / 16 - 1) i
                UNION
                SELECT substring(b.children FROM i * 16 + 1 FOR 16)
                FROM {blobs} b JOIN held ON b.hash = held.hash
                CROSS JOIN LATERAL generate_series(0, length(b.children) / 16 - 1) i
            )
            SELECT count(*), coalesce(sum(octet_length({bdata})), 0)
            FROM {blobs} b JOIN held USING (hash)""",
}
"""Statement templates; :class:`SQL` fills in the schema-qualified table names."""


class SQL:
    """Statement texts for one schema (formatted once, reused for every call)."""

    CKPT_COLS = (
        "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, tag, data, metadata, run_id"
    )
    REF_COLS = (
        "thread_id, checkpoint_ns, channel, version, kind, tag, data, hashes, length, logical"
    )
    WRITE_COLS = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, data, hashes"

    select_ckpt: str
    select_refs: str
    select_writes: str
    insert_blobs: str
    insert_refs: str
    upsert_ckpt: str
    upsert_ref: str
    upsert_writes: str
    ancestors: str
    adjust: str
    drop_unreferenced: str
    load_blobs: str
    load_blob_counts: str
    lock_blobs: str
    thread_blobs: str

    def __init__(self, schema: str = "public") -> None:
        self.schema = schema
        s = self.s = quote_ident(schema)
        self.ckpt = f"{s}.checkpoints"
        self.refs = f"{s}.checkpoint_refs"
        self.blobs = f"{s}.checkpoint_blobs"
        self.counts = f"{s}.checkpoint_blob_refs"
        self.writes = f"{s}.checkpoint_writes"
        names = {
            "ckpt": self.ckpt,
            "refs": self.refs,
            "blobs": self.blobs,
            "counts": self.counts,
            "writes": self.writes,
            "ckpt_cols": self.CKPT_COLS,
            "ckpt_cols_raw": self.CKPT_COLS,
            "ref_cols": self.REF_COLS,
            "write_cols": self.WRITE_COLS,
            "data": _blob_data(),
            "bdata": _blob_data("b."),
        }
        for name, template in _STATEMENTS.items():
            setattr(self, name, template.format(**names))


def columns(rows: Any, n: int) -> list[list[Any]]:
    """Rows -> one list per column (for ``unnest(%s::type[], ...)``)."""
    cols: list[list[Any]] = [[] for _ in range(n)]
    for row in rows:
        for i in range(n):
            cols[i].append(row[i])
    return cols

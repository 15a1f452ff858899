"""Where the bytes of a Postgres conversation go: ``python -m bench.pgsize [N]``.

Runs the conversation workload (bench/workloads/conversation.py) for N turns
(default 1000) on threadloom's PostgresSaver, then prints the stored total (as
the bench counts it), each table's heap and total size, live/dead tuples, the
average stored size of every column, and blob bytes by tag. It exists to find
the next byte to save (issue #7): the per-column averages say which column of
which table costs what. Needs THREADLOOM_BENCH_PG; takes ~45 s for 1,000 turns.
"""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Any

from bench.sides import sides
from bench.workloads.common import invoke, thread
from bench.workloads.conversation import build_agent, human, stored_bytes

_TABLES = """
    SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid),
        coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), coalesce(s.n_tup_upd, 0),
        coalesce(s.n_tup_del, 0)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
    WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY 2 DESC"""

_INDEXES = """
    SELECT t.relname, c.relname, pg_relation_size(c.oid), coalesce(s.idx_scan, 0)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_index i ON i.indexrelid = c.oid JOIN pg_class t ON t.oid = i.indrelid
    LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = c.oid
    WHERE n.nspname = %s ORDER BY 3 DESC"""

_COLUMNS = """
    SELECT column_name FROM information_schema.columns
    WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position"""


def run(turns: int) -> dict[str, Any]:
    """Run the conversation; return the stored MB and the admin connection's report."""
    side = next(s for s in sides() if s.name == "threadloom")
    with tempfile.TemporaryDirectory() as tmp, side.saver("postgres", tmp) as saver:
        graph = build_agent(side).compile(checkpointer=saver)
        base = stored_bytes(saver)
        cfg = thread("conversation")
        started = time.process_time()
        for i in range(1, turns + 1):
            invoke(graph, {"messages": [human(i)], "turn": i}, cfg, "sync")
        cpu = time.process_time() - started
        mb = (stored_bytes(saver) - base) / 1e6
        print(f"turns {turns}  cpu {cpu:.1f} s  stored {mb:.3f} MB")
        report(saver.bench_pg_admin, saver.bench_pg_schema)
        return {"mb": mb}


def report(admin: Any, schema: str) -> None:
    """Print sizes per table, per column and per blob tag."""
    print(
        f"{'table':24} {'total MB':>9} {'heap MB':>8} {'live':>6} {'dead':>6}"
        f" {'upd':>6} {'del':>6}  B/row"
    )
    tables = admin.execute(_TABLES, (schema,)).fetchall()
    for name, total, heap, live, dead, upd, dele in tables:
        per_row = total / live if live else 0
        print(
            f"{name:24} {total / 1e6:9.3f} {heap / 1e6:8.3f} {live:6} {dead:6}"
            f" {upd:6} {dele:6}  {per_row:.0f}"
        )
    for table, index, size, _scans in admin.execute(_INDEXES, (schema,)).fetchall():
        if size > 8192:
            print(f"  index {index} ({table}): {size / 1e6:.3f} MB")
    for name, *_ in tables:
        cols = [r[0] for r in admin.execute(_COLUMNS, (schema, name)).fetchall()]
        sizes = ", ".join(f"avg(pg_column_size({c}))" for c in cols)
        row = admin.execute(f'SELECT count(*), {sizes} FROM "{schema}".{name}').fetchone()
        if row[0]:
            avg = "  ".join(f"{c}={float(v or 0):.1f}" for c, v in zip(cols, row[1:]))
            print(f"  {name}: {avg}")
    blobs = f'"{schema}".checkpoint_blobs'
    tag = "tag" if "tag" in _column_names(admin, schema) else "kind"
    for r in admin.execute(
        f"SELECT left({tag}::text, 16), count(*), sum(length(data)) FROM {blobs} GROUP BY 1"
        " ORDER BY 3 DESC"
    ).fetchall():
        print(f"  blob tag {r[0]!r}: {r[1]} rows, {r[2]} data bytes")


def _column_names(admin: Any, schema: str) -> list[str]:
    return [r[0] for r in admin.execute(_COLUMNS, (schema, "checkpoint_blobs")).fetchall()]


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)

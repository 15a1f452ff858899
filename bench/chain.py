"""Per-superstep cost of a 10-node chain on one side, optionally under cProfile.

A quick tool for working on the hot path (the full side-by-side numbers come
from ``python -m bench --only superstep``):

    python -m bench.chain memory|sqlite-normal|sqlite-full|postgres|none [sync|async|exit]
        [--lib threadloom|langgraph] [-n 200] [--profile] [--sort tottime] [--top 35]

Postgres uses THREADLOOM_TEST_PG (default postgresql://postgres@127.0.0.1:5432/test)
in a schema of its own, dropped at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import os
import pstats
import tempfile
import time
from typing import Any, TypedDict


class ChainState(TypedDict):
    count: int


def _bump(state: ChainState) -> dict[str, int]:
    return {"count": state["count"] + 1}


def _saver(lib: str, kind: str, tmp: str) -> tuple[Any, Any]:
    """(saver, cleanup)."""
    if kind == "none":
        return None, lambda: None
    if kind == "memory":
        return importlib.import_module(f"{lib}.checkpoint.memory").InMemorySaver(), lambda: None
    if kind.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(os.path.join(tmp, "chain.db"), check_same_thread=False)
        saver = importlib.import_module(f"{lib}.checkpoint.sqlite").SqliteSaver(conn)
        saver.setup()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if kind == 'sqlite-full' else 'NORMAL'}")
        return saver, conn.close
    import psycopg
    from psycopg.rows import dict_row

    url = os.environ.get("THREADLOOM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"chain_{lib}_{os.getpid()}"
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    conn.execute(f"CREATE SCHEMA {schema}")
    conn.execute(f"SET search_path TO {schema}")
    saver = importlib.import_module(f"{lib}.checkpoint.postgres").PostgresSaver(conn)
    saver.setup()

    def cleanup() -> None:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.close()

    return saver, cleanup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind")
    ap.add_argument("durability", nargs="?", default="sync")
    ap.add_argument("--lib", default="threadloom", choices=["threadloom", "langgraph"])
    ap.add_argument("-n", type=int, default=200, help="timed invokes (distinct threads)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--top", type=int, default=35)
    args = ap.parse_args()
    graph_mod = importlib.import_module(f"{args.lib}.graph")
    builder = graph_mod.StateGraph(ChainState)
    prev = graph_mod.START
    for i in range(10):
        builder.add_node(f"n{i}", _bump)
        builder.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    builder.add_edge(prev, graph_mod.END)
    with tempfile.TemporaryDirectory() as tmp:
        saver, cleanup = _saver(args.lib, args.kind, tmp)
        try:
            graph = builder.compile(checkpointer=saver)
            extra = {"durability": args.durability} if saver is not None else {}

            def run(n: int, offset: int) -> None:
                for i in range(n):
                    config = {"configurable": {"thread_id": f"t{i + offset}"}}
                    graph.invoke({"count": 0}, config, **extra)

            run(10, 10_000)  # warm-up
            t0 = time.perf_counter()
            run(args.n, 0)
            elapsed = time.perf_counter() - t0
            print(
                f"{args.lib} {args.kind}/{args.durability}: {elapsed / args.n / 10 * 1e6:.0f} us/step"
            )
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                run(args.n, 20_000)
                profile.disable()
                pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)
        finally:
            cleanup()


if __name__ == "__main__":
    main()

"""``threadloom``: run the demo and inspect a SQLite checkpoint database.

Each inspection command opens the database through the SqliteSaver API, calls
one method and prints; nothing is written. ``--help`` on any command shows its use.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from threadloom.demo.tree import TreeRow, render_tree

__all__ = ["main"]


def _open(db: str) -> Any:
    if not Path(db).is_file():
        raise SystemExit(f"threadloom: no database at {db!r}")
    from threadloom.demo.run import open_saver

    return open_saver(db)


def _thread_config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _ids(tup: Any) -> tuple[str, str | None]:
    cid = tup.config["configurable"]["checkpoint_id"]
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return cid, parent


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the scripted support-agent demo on a fresh SQLite file."""
    from threadloom.demo.run import main as run_demo

    return run_demo(args.db)


def cmd_threads(args: argparse.Namespace) -> int:
    """List threads: checkpoints, latest step and time."""
    saver = _open(args.db)
    threads: dict[str, list[Any]] = {}
    for tup in saver.list(None):
        threads.setdefault(tup.config["configurable"]["thread_id"], []).append(tup)
    print(f"{'thread':<24} {'checkpoints':>11} {'last step':>9}  last update")
    for thread, tups in sorted(threads.items()):
        latest = max(tups, key=lambda t: _ids(t)[0])
        step = (latest.metadata or {}).get("step", "?")
        print(f"{thread:<24} {len(tups):>11} {step!s:>9}  {latest.checkpoint['ts']}")
    if not threads:
        print("(no threads)")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    """Checkpoints of a thread, newest first, with what each step changed."""
    saver = _open(args.db)
    tups = list(saver.list(_thread_config(args.thread), limit=args.limit))
    if not tups:
        print(f"threadloom: thread {args.thread!r} has no checkpoints", file=sys.stderr)
        return 1
    for tup in tups:
        cid, parent = _ids(tup)
        meta = tup.metadata or {}
        ns = tup.config["configurable"].get("checkpoint_ns") or ""
        changed = ",".join(tup.checkpoint.get("updated_channels") or []) or "-"
        writes = len(tup.pending_writes or [])
        print(
            f"{cid}  step {meta.get('step', '?')!s:>3} {meta.get('source', '?'):<6} "
            f"parent={(parent or '-')[-12:]:<12} changed={changed}"
            + (f" pending_writes={writes}" if writes else "")
            + (f" ns={ns}" if ns else "")
        )
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    """A thread's checkpoints as a tree: forks show as branches."""
    saver = _open(args.db)
    rows = []
    for tup in saver.list(_thread_config(args.thread)):
        if tup.config["configurable"].get("checkpoint_ns"):
            continue  # subgraph checkpoints live in their own trees
        cid, parent = _ids(tup)
        meta = tup.metadata or {}
        changed = ",".join(tup.checkpoint.get("updated_channels") or []) or "-"
        rows.append(
            TreeRow(
                cid,
                parent,
                f"step {meta.get('step', '?')!s:>3} {meta.get('source', '?'):<6} {changed}",
            )
        )
    if not rows:
        print(f"threadloom: thread {args.thread!r} has no checkpoints", file=sys.stderr)
        return 1
    latest = max(rows, key=lambda r: r.id).id
    for line in render_tree(rows, latest):
        print(line)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Counts and sizes: checkpoints, writes, threads, bytes stored."""
    saver = _open(args.db)
    try:
        stats = saver.stats(args.thread)
    except NotImplementedError as exc:
        print(f"threadloom: {exc}", file=sys.stderr)
        return 1
    for key, value in stats.items() if isinstance(stats, dict) else vars(stats).items():
        print(f"{key:<20} {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="threadloom", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn in (
        ("demo", cmd_demo),
        ("threads", cmd_threads),
        ("history", cmd_history),
        ("tree", cmd_tree),
        ("stats", cmd_stats),
    ):
        p = sub.add_parser(name, help=fn.__doc__, description=fn.__doc__)
        p.set_defaults(fn=fn)
        if name == "demo":
            p.add_argument("--db", default="threadloom-demo.db", help="SQLite file (recreated)")
            continue
        p.add_argument("db", help="path to a SQLite checkpoint database")
        if name in ("history", "tree"):
            p.add_argument("thread", help="thread_id")
        if name == "history":
            p.add_argument("--limit", type=int, default=None, help="newest N checkpoints only")
        if name == "stats":
            p.add_argument("--thread", default=None, help="one thread only")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``threadloom`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

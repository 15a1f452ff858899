"""``threadloom``: run the demo and inspect a SQLite checkpoint database.

The inspection commands (threads, history, tree, stats) open the database
read-only (a ``mode=ro`` SQLite URI: no schema setup, no migration, nothing
written; SQLite may create a WAL file's ``-wal``/``-shm`` side files, which
readers need) and go through the SqliteSaver API, needing no stored value
(an app's classes or a key). What they print comes from
the database (thread ids often come from web requests), so control characters
are escaped before they reach the terminal. ``--help`` on any command shows its use.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from threadloom.demo.tree import TreeRow, render_tree
from threadloom.errors import (
    SerializationError,
    StorageError,
    ThreadloomError,
)

__all__ = ["main", "open_readonly", "printable"]


def printable(text: str) -> str:
    """``text`` with every non-printable character (ESC, CR, bidi overrides, ...)
    escaped repr-style (``\\x1b``), so stored data cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def say(text: str = "", err: bool = False) -> None:
    """Print one line, escaped (see :func:`printable`)."""
    print(printable(text), file=sys.stderr if err else sys.stdout)


def open_readonly(db: str, *, serde: Any = None) -> Any:
    """A SqliteSaver reading ``db`` through a read-only connection (never set up),
    with ``serde`` (default: the strict default serializer).

    Raises:
        StorageError: no file at ``db``, not a SQLite database, no threadloom
            tables (a LangGraph database is named as such), or a schema version
            this threadloom cannot read without migrating.
    """
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.checkpoint.sqlite.executor import storage_error

    path = Path(db)
    if not path.is_file():
        raise StorageError(f"no database at {db!r}")
    try:
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            check_same_thread=False,
            isolation_level=None,
        )
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open {db!r} read-only: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        _check_schema(conn, db)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise storage_error(exc, repr(db)) from exc
    except BaseException:
        conn.close()
        raise
    saver = SqliteSaver(conn, serde=serde)
    saver.is_setup = True  # setup() would write the schema and PRAGMAs
    return saver


def _check_schema(conn: sqlite3.Connection, db: str) -> None:
    from threadloom.checkpoint.sqlite.executor import setup_statements
    from threadloom.checkpoint.sqlite.schema import MIGRATIONS

    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    tables = {r[0] for r in rows}
    if not {"tl_migrations", "tl_checkpoints"} <= tables:
        hint = (
            "; it looks like a LangGraph checkpoint database (tables checkpoints, writes),"
            " which threadloom does not read"
            if {"checkpoints", "writes"} <= tables
            else ""
        )
        raise StorageError(f"{db!r} holds no threadloom checkpoint tables (tl_*){hint}")
    current = conn.execute("SELECT coalesce(max(v), 0) FROM tl_migrations").fetchone()[0]
    setup_statements(current, False, [])  # raises if the schema is newer than ours
    if current < len(MIGRATIONS):
        raise StorageError(
            f"{db!r} has schema version {current}, older than this threadloom's"
            f" ({len(MIGRATIONS)}); the inspection commands never migrate: open it once"
            " with SqliteSaver (which migrates it), then inspect it"
        )


class _Skimming:
    """The serializer of the listing commands (they print ids and metadata, never
    values): an app's classes come back as ``UnknownObject`` (nothing imported or
    run), a value it cannot read at all (encrypted, no key) as an empty list."""

    def __init__(self) -> None:
        from threadloom.checkpoint.serde import MsgpackSerializer

        self._inner = MsgpackSerializer(on_unknown="raw")

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise StorageError("the inspection commands never write")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        try:
            return self._inner.loads_typed(data)
        except SerializationError:
            return []


def _skimming(db: str) -> Any:
    """A read-only saver for commands that never print values: values do not
    stop them. Lists and dicts stored piece by piece are not assembled at all
    (their pieces, encrypted, would not add up); other values go through
    :class:`_Skimming`."""
    saver = open_readonly(db, serde=_Skimming())
    saver.codec.skim = True
    return saver


@contextmanager
def _reader(db: str) -> Iterator[Any]:
    saver = _skimming(db)
    try:
        yield saver
    finally:
        saver.conn.close()


def _thread_config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _ids(tup: Any) -> tuple[str, str | None]:
    cid = tup.config["configurable"]["checkpoint_id"]
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return cid, parent


def _meta(tup: Any, key: str) -> str:
    """A metadata field as text (metadata is caller-supplied: any JSON value)."""
    return str((tup.metadata or {}).get(key, "?"))


def _changed(tup: Any) -> str:
    return ",".join(map(str, tup.checkpoint.get("updated_channels") or [])) or "-"


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the scripted support-agent demo on a fresh SQLite file."""
    from threadloom.demo.dbfile import DemoFileRefused
    from threadloom.demo.run import main as run_demo

    try:
        return run_demo(args.db, force=args.force)
    except DemoFileRefused as exc:
        say(f"threadloom demo: {exc}", err=True)
        return 2


def cmd_threads(args: argparse.Namespace) -> int:
    """List threads: checkpoints, latest step and time. A thread whose rows
    cannot be read is listed as unreadable (with the error) and the command
    exits 1 after listing the others."""
    say(f"{'thread':<24} {'checkpoints':>11} {'last step':>9}  last update")
    listed = unreadable = 0
    with _reader(args.db) as saver:
        for (thread,) in saver.conn.execute("SELECT thread_id FROM tl_threads ORDER BY thread_id"):
            try:
                row = _thread_row(saver, thread)
            except ThreadloomError as exc:
                unreadable += 1
                row = f"{thread:<24} unreadable: {exc}"
            if row is not None:
                listed += 1
                say(row)
    if not listed:
        say("(no threads)")
    if unreadable:
        say(f"threadloom: {unreadable} thread(s) could not be read (marked above)", err=True)
        return 1
    return 0


def _thread_row(saver: Any, thread: str) -> str | None:
    """One thread's line of ``threads`` (None: no checkpoints). Its
    checkpoints are read newest first, one at a time (nothing else is held);
    a subgraph's checkpoint is the latest only of a thread without root ones."""
    count, step, ts, root = 0, "?", "?", False
    for tup in saver.list(_thread_config(thread)):
        count += 1
        if count == 1 or (not root and not tup.config["configurable"].get("checkpoint_ns")):
            step, ts = _meta(tup, "step"), tup.checkpoint.get("ts") or "?"
            root = not tup.config["configurable"].get("checkpoint_ns")
    if not count:
        return None
    return f"{thread:<24} {count:>11} {step:>9}  {ts}"


def cmd_history(args: argparse.Namespace) -> int:
    """Checkpoints of a thread, newest first, with what each step changed; the
    ones before a checkpoint that cannot be read are printed, then the error."""
    tups: list[Any] = []
    failure: Exception | None = None
    config = _thread_config(args.thread)
    with _reader(args.db) as saver:
        try:
            for tup in saver.list(config, limit=args.limit):
                tups.append(tup)
        except ThreadloomError as exc:
            failure = _one_by_one(saver, config, tups, args.limit, exc)
    if not tups and failure is None:
        say(f"threadloom: thread {args.thread!r} has no checkpoints", err=True)
        return 1
    for tup in tups:
        cid, parent = _ids(tup)
        ns = tup.config["configurable"].get("checkpoint_ns") or ""
        writes = len(tup.pending_writes or [])
        say(
            f"{cid}  step {_meta(tup, 'step'):>3} {_meta(tup, 'source'):<6} "
            f"parent={(parent or '-')[-12:]:<12} changed={_changed(tup)}"
            + (f" pending_writes={writes}" if writes else "")
            + (f" ns={ns}" if ns else "")
        )
    if failure is not None:
        say(f"threadloom: {failure}", err=True)
        return 1
    return 0


def _one_by_one(
    saver: Any, config: dict[str, Any], tups: list[Any], limit: int | None, error: Exception
) -> Exception | None:
    """After a failed page (a list reads a page at a time, and one damaged
    checkpoint fails its page), read on one checkpoint at a time to the
    damaged one, appending to ``tups``; its error (None: none failed again)."""
    while limit is None or len(tups) < limit:
        before = tups[-1].config if tups else None
        try:
            got = list(saver.list(config, before=before, limit=1))
        except ThreadloomError as exc:
            return exc
        if not got:
            return None
        tups.extend(got)
    return None


def cmd_tree(args: argparse.Namespace) -> int:
    """A thread's checkpoints as a tree: forks show as branches."""
    rows = []
    with _reader(args.db) as saver:
        for tup in saver.list(_thread_config(args.thread)):
            if tup.config["configurable"].get("checkpoint_ns"):
                continue  # subgraph checkpoints live in their own trees
            cid, parent = _ids(tup)
            label = f"step {_meta(tup, 'step'):>3} {_meta(tup, 'source'):<6} {_changed(tup)}"
            rows.append(TreeRow(cid, parent, label))
    if not rows:
        say(f"threadloom: thread {args.thread!r} has no checkpoints", err=True)
        return 1
    latest = max(rows, key=lambda r: r.id).id
    for line in render_tree(rows, latest):
        say(line)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Counts and sizes: checkpoints, writes, threads, bytes stored."""
    with _reader(args.db) as saver:
        try:
            stats = saver.stats(args.thread)
        except NotImplementedError as exc:
            say(f"threadloom: {exc}", err=True)
            return 1
    if args.thread is not None and not (stats or {}).get("checkpoints"):
        say(f"threadloom: thread {args.thread!r} has no checkpoints", err=True)
        return 1
    for key, value in stats.items() if isinstance(stats, dict) else vars(stats).items():
        if key == "thread_id" and value is None:
            value = "(all threads)"  # whole-store stats name no thread
        say(f"{key:<20} {value}")
    return 0


def cmd_import_langgraph(args: argparse.Namespace) -> int:
    """Copy the threads of a LangGraph SQLite database into a threadloom one."""
    from threadloom.cli_import import import_langgraph_file

    return import_langgraph_file(args)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of every command (``--help`` shows each one's use)."""
    parser = argparse.ArgumentParser(prog="threadloom", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn in (
        ("demo", cmd_demo),
        ("threads", cmd_threads),
        ("history", cmd_history),
        ("tree", cmd_tree),
        ("stats", cmd_stats),
        ("import-langgraph", cmd_import_langgraph),
    ):
        p = sub.add_parser(name, help=fn.__doc__, description=fn.__doc__)
        p.set_defaults(fn=fn)
        if name == "import-langgraph":
            p.add_argument("source", help="a LangGraph SqliteSaver database (opened read-only)")
            p.add_argument("dest", help="the threadloom SQLite database to import into")
            p.add_argument("--thread", action="append", help="import only this thread (repeatable)")
            p.add_argument(
                "--allow",
                action="append",
                metavar="MODULE:CLASS",
                help="an application class the stored state holds, allowed on both sides "
                "(repeatable; its module must import here, e.g. via PYTHONPATH)",
            )
            continue
        if name == "demo":
            p.add_argument(
                "--db", default="threadloom-demo.db", help="SQLite file the demo (re)creates"
            )
            p.add_argument(
                "--force",
                action="store_true",
                help="delete --db even if the demo did not create it",
            )
            continue
        p.add_argument("db", help="path to a SQLite checkpoint database (opened read-only)")
        if name in ("history", "tree"):
            p.add_argument("thread", help="thread_id")
        if name == "history":
            p.add_argument(
                "--limit", type=_positive_int, default=None, help="newest N checkpoints only"
            )
        if name == "stats":
            p.add_argument("--thread", default=None, help="one thread only")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``threadloom`` console script: exit code 0 on success,
    1 on a threadloom error (printed, no traceback) or a closed stdout pipe
    (``| head``), 2 on a usage error or a refused demo file."""
    args = build_parser().parse_args(argv)
    try:
        code = int(args.fn(args) or 0)
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
        return 1
    except ThreadloomError as exc:
        say(f"threadloom: {exc}", err=True)
        return 1
    return code


def _drop_stdout() -> None:
    """The reader of our stdout left: point stdout at /dev/null so the flush at
    exit does not raise a second BrokenPipeError (Python's documented recipe)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())

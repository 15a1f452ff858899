"""``threadloom import-langgraph``: a LangGraph SQLite file's threads copied into
a threadloom one (:func:`threadloom.checkpoint.migrate.import_langgraph`), read
with LangGraph's own saver; app classes allowed with ``--allow``, LangGraph's
AES rows read with ``LANGGRAPH_AES_KEY`` and stored encrypted with it."""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import warnings
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

from threadloom.cli import say
from threadloom.errors import ConfigError, ImportConflictError, SerializationError, StorageError

__all__ = ["import_langgraph_file"]


def import_langgraph_file(args: argparse.Namespace) -> int:
    """Copy the threads of a LangGraph SQLite database into a threadloom one."""
    from threadloom.checkpoint.migrate import import_langgraph
    from threadloom.checkpoint.serde import MsgpackSerializer
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.checkpoint.sqlite.lgfile import LangGraphDataWarning, has_langgraph_tables

    if not Path(args.source).is_file():
        raise StorageError(f"no database at {args.source!r}")
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver as LangGraphSqliteSaver
    except ImportError:
        raise ConfigError(
            "import-langgraph reads the file with LangGraph's own SqliteSaver: "
            "pip install langgraph-checkpoint-sqlite"
        ) from None
    allowed = [_import_class(spec) for spec in args.allow or ()]
    with ExitStack() as stack:
        uri = f"{Path(args.source).resolve().as_uri()}?mode=ro"
        conn = stack.enter_context(closing(sqlite3.connect(uri, uri=True)))
        if not has_langgraph_tables(conn):
            raise StorageError(f"{args.source!r} holds no LangGraph checkpoints")
        sealed = _sealed_type(conn)
        source = LangGraphSqliteSaver(conn)
        widen = getattr(source.serde, "with_msgpack_allowlist", None)
        if allowed and widen is not None:  # LangGraph in strict mode revives them too
            source.serde = widen(allowed)
        serde: Any = MsgpackSerializer(allowed=allowed)
        if sealed is not None:  # read and stored with the LangGraph program's key
            source.serde, serde = _aes_sides(args.source, conn, sealed, source.serde, serde)
        with warnings.catch_warnings():
            # the warning that sends users here, when dest is the LangGraph file itself
            warnings.simplefilter("ignore", LangGraphDataWarning)
            target = stack.enter_context(SqliteSaver.from_conn_string(args.dest, serde=serde))
        conflict: ImportConflictError | None = None
        try:
            result = import_langgraph(source, target, thread_ids=args.thread or None)
        except SerializationError as exc:
            raise SerializationError(f"{exc}; here: --allow MODULE:CLASS (repeatable)") from exc
        except ImportConflictError as exc:  # the others came over: say so, then refuse
            conflict, result = exc, exc.result
    there = {"checkpoints": result.skipped, "pending writes": result.skipped_writes}
    kept = " and ".join(f"{n} {what}" for what, n in there.items() if n)
    say(
        f"imported {result.checkpoints} checkpoints and {result.writes} pending writes "
        f"of {len(result.threads)} threads into {args.dest}"
        + (f" ({kept} were there already)" if kept else "")
    )
    if result.differing_writes:
        say(
            f"{result.differing_writes} pending writes differ from what {args.dest} holds "
            "and were left as they are"
        )
    if conflict is not None:
        say(f"threadloom: {conflict} (here: --thread to name the threads to import)", err=True)
        return 1
    return 0


def _sealed_type(conn: sqlite3.Connection) -> str | None:
    """The type of an encrypted value in a LangGraph file (``msgpack+aes``), if any."""
    for table in ("checkpoints", "writes"):
        try:
            row = conn.execute(f"SELECT type FROM {table} WHERE type LIKE '%+%' LIMIT 1").fetchone()
        except sqlite3.Error:
            continue
        if row is not None:
            return str(row[0])
    return None


def _aes_sides(
    path: str, conn: sqlite3.Connection, sealed: str, reader: Any, inner: Any
) -> tuple[Any, Any]:
    """An encrypted LangGraph file: LangGraph's AES reader over ``reader`` (its
    allowlist kept; key from ``LANGGRAPH_AES_KEY``, as the LangGraph program
    took it) and a threadloom serializer encrypting with the same key, so
    nothing lands in clear. The key is tried on one sealed value first: a wrong
    one is said before anything is written."""
    if not os.environ.get("LANGGRAPH_AES_KEY"):
        raise ConfigError(
            f"{path!r} holds encrypted values (type {sealed!r}): set LANGGRAPH_AES_KEY to the "
            "key the LangGraph program used; the threadloom file is then encrypted with it too "
            "(read it with EncryptedSerializer.from_pycryptodome_aes(), docs/serde.md)"
        )
    if not sealed.endswith("+aes"):
        raise ConfigError(
            f"{path!r} holds values sealed as {sealed!r}: only LangGraph's AES is read here"
        )
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted

    from threadloom.checkpoint.serde import EncryptedSerializer

    try:
        source = LangGraphEncrypted.from_pycryptodome_aes(reader)
        target = EncryptedSerializer.from_pycryptodome_aes(inner)
    except ValueError as exc:  # a key of the wrong length
        raise ConfigError(f"LANGGRAPH_AES_KEY: {exc}") from None
    row = (
        conn.execute(
            "SELECT type, checkpoint FROM checkpoints WHERE type LIKE '%+aes' LIMIT 1"
        ).fetchone()
        or conn.execute("SELECT type, value FROM writes WHERE type LIKE '%+aes' LIMIT 1").fetchone()
    )
    if row is not None:
        try:
            source.loads_typed((row[0], row[1]))
        except ValueError as exc:  # pycryptodome: "MAC check failed"
            raise ConfigError(
                f"LANGGRAPH_AES_KEY does not open {path!r}'s encrypted values ({exc}): it is"
                " not the key the LangGraph program used; nothing was imported"
            ) from None
    return source, target


def _import_class(spec: str) -> type:
    """The class named ``module:Qual.Name`` (``--allow``), imported here: the
    user names it, so importing it is their choice (the stored data never is)."""
    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        raise ConfigError(f"--allow takes module:Class, got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"--allow {spec}: cannot import it ({exc}); is its package on PYTHONPATH?"
        ) from exc
    if not isinstance(obj, type):
        raise ConfigError(f"--allow {spec}: not a class")
    return obj

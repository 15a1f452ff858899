"""Health of PostgreSQL connections and the errors callers see.

Failures are mapped to :class:`~threadloom.errors.StorageError` at one seam,
naming the server (host, port, database; never the password) and saying what
to do (``call saver.setup()``, ``upgrade threadloom``), with the driver's
exception chained for debugging.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from threadloom.errors import StorageError

__all__ = [
    "acheck_connection",
    "check_connection",
    "describe_target",
    "is_connection_lost",
    "is_dead",
    "storage_error",
]


def describe_target(url_or_conn: Any) -> str:
    """``host:port/dbname`` of a URL or connection, for error messages (no password)."""
    try:
        if isinstance(url_or_conn, str):
            info = conninfo_to_dict(url_or_conn)
            host, port, db = info.get("host"), info.get("port"), info.get("dbname")
        else:
            pinfo = url_or_conn.info
            host, port, db = pinfo.host, pinfo.port, pinfo.dbname
    except Exception:  # a description must never raise
        return "PostgreSQL"
    return f"PostgreSQL at {host or 'localhost'}:{port or 5432}/{db or ''}".rstrip("/")


def storage_error(exc: BaseException, target: str, schema: str | None = None) -> StorageError:
    """A StorageError that says what failed in words, chained to the driver's error."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, pg_errors.UndefinedTable):
        where = f" in schema {schema!r}" if schema else ""
        msg = f"threadloom tables are missing{where} on {target}: call saver.setup() first"
    elif isinstance(exc, pg_errors.UndefinedColumn):
        where = f"schema {schema!r}" if schema else "the schema"
        msg = (
            f"the checkpoint tables in {where} on {target} are not threadloom's "
            f"(LangGraph's?) or not migrated: call saver.setup(), or use another schema ({exc})"
        )
    elif isinstance(exc, PoolTimeout):
        msg = f"no connection to {target} available within the pool timeout ({exc})"
    elif isinstance(exc, psycopg.OperationalError) and is_connection_lost(exc):
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"cannot reach {target}: {reason}"
    else:
        msg = f"{target} refused the operation: {type(exc).__name__}: {exc}".strip()
    err = StorageError(msg)
    err.__cause__ = exc
    return err


_LOST_STATES = {"57P01", "57P02", "57P03"}  # admin shutdown / crash shutdown / cannot connect now


def is_connection_lost(exc: BaseException, conn: Any = None) -> bool:
    """True when the failure was the connection going away, not the statement."""
    if conn is not None and (conn.closed or conn.broken):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _LOST_STATES


def is_dead(conn: Any) -> bool:
    """Whether an idle connection is known dead, without a round trip.

    A backend that ends (terminated, ``idle_session_timeout``, a server
    shutdown) first sends a FATAL message, then closes the socket. Reading the
    FATAL leaves libpq's status OK (libpq hands an error that arrives while idle
    to the notice processor), so looking once at the status is not enough: the
    pending input is read until the socket has nothing more to say (the close
    turns the status BAD) and parsed, and a FATAL seen on the way counts as dead
    even when the close itself has not arrived yet.
    """
    if conn.closed or conn.broken:
        return True
    pgconn = conn.pgconn
    fatal: list[Any] = []

    def on_notice(diag: Any) -> None:
        if (diag.severity_nonlocalized or diag.severity) in _FATAL_SEVERITIES:
            fatal.append(diag)

    try:
        for _ in range(_MAX_READS):
            if not _readable(pgconn.socket):
                break
            conn.add_notice_handler(on_notice)
            try:
                pgconn.consume_input()
                pgconn.is_busy()  # parses what was read: a FATAL reaches on_notice
            finally:
                conn.remove_notice_handler(on_notice)
            if fatal or pgconn.status != pq.ConnStatus.OK:
                break
    except (OSError, psycopg.Error):
        return True
    return bool(fatal) or pgconn.status != pq.ConnStatus.OK


def _readable(fd: int) -> bool:
    """Whether ``fd`` has input (or a close) waiting, without blocking.

    ``poll`` has no limit on the descriptor's number; ``select.select`` raises
    ``ValueError`` for a descriptor >= 1024 (FD_SETSIZE), i.e. in any process
    with more than ~1,000 files or sockets open. Windows has no ``poll``; its
    ``select`` limits how many sockets are asked about, not their numbers.
    """
    if _poll is None:
        readable, _, _ = select.select([fd], [], [], 0)
        return bool(readable)
    poller = _poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


_poll = getattr(select, "poll", None)
_FATAL_SEVERITIES = {"FATAL", "PANIC"}
_MAX_READS = 3  # FATAL, then the close; bounded so a chatty socket cannot spin


def check_connection(conn: Any) -> None:
    """Pool ``check`` callback: refuse a connection :func:`is_dead` finds dead."""
    if is_dead(conn):
        raise psycopg.OperationalError("connection closed by the server while idle")


async def acheck_connection(conn: Any) -> None:
    """Async pool twin of :func:`check_connection`."""
    check_connection(conn)

"""Taking a live connection out of a pool, passing over the dead ones.

A server that ends idle backends (``idle_session_timeout``, a failover,
``pg_terminate_backend``) can leave every pooled connection dead at once.
psycopg_pool's own ``check`` sleeps with a growing backoff (1 s, 2 s, 4 s ...)
after each connection that fails it, so a handful of dead connections cost many
seconds or the whole pool timeout. The saver checks here instead, with
:func:`~.health.is_dead` (no round trip): a dead connection is closed and handed
back as broken (the pool opens a replacement), and the next one is taken at
once, at most ``max_size + 1`` times; after that the pool is made of new
connections, and the last one taken is used whatever it looks like (a
connection lost later is the transaction's replay to handle).

A pool with a ``check`` of its own (``pool={"check": ...}``, or a pool you
built) still runs it inside ``getconn()``, with psycopg_pool's backoff sleep
after each connection that fails it. :func:`pass_dead_to_checkout` wraps that
check so that, for the saver's own checkouts only, a connection
:func:`~.health.is_dead` already calls dead skips it (the check passes) and
reaches the loop here at once; live connections still get the check (e.g. the
round trip that catches half-open ones), and other users of the pool see the
check unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from psycopg_pool import AsyncConnectionPool

from threadloom.checkpoint.postgres.health import is_dead

__all__ = ["alive_from_pool", "live_from_pool", "pass_dead_to_checkout"]

# set while the saver itself is inside pool.getconn(): the pool's check runs in
# the caller's thread (sync) or task (async), so it sees this
_saver_checkout: ContextVar[bool] = ContextVar("threadloom_pg_checkout", default=False)
_WRAPPED = "__threadloom_pool_check__"


def pass_dead_to_checkout(pool: Any) -> None:
    """Wrap ``pool``'s own ``check`` (if any) so a dead connection the saver
    takes skips it: psycopg_pool sleeps 1, 2, 4... s after every failed check,
    while the checkout loop here replaces a dead connection at once.

    The pool's check contract: raising rejects the connection, returning
    accepts it; the wrapper returns None for a dead one (the checkout loop then
    discards it) and otherwise returns what the check does. Idempotent; a pool
    without a ``_check`` attribute (another psycopg_pool) is left alone.
    """
    check = getattr(pool, "_check", None)
    if check is None or getattr(check, _WRAPPED, None) is not None:
        return
    fast: Callable[[Any], Any]
    if isinstance(pool, AsyncConnectionPool):

        async def fast(conn: Any) -> None:
            if _saver_checkout.get() and is_dead(conn):
                return None
            return await check(conn)

    else:

        def fast(conn: Any) -> None:
            if _saver_checkout.get() and is_dead(conn):
                return None
            return check(conn)

    setattr(fast, _WRAPPED, check)
    pool._check = fast


def _take(pool: Any) -> Any:
    token = _saver_checkout.set(True)
    try:
        return pool.getconn()
    finally:
        _saver_checkout.reset(token)


async def _atake(pool: Any) -> Any:
    token = _saver_checkout.set(True)
    try:
        return await pool.getconn()
    finally:
        _saver_checkout.reset(token)


def _attempts(pool: Any) -> int:
    return int(getattr(pool, "max_size", 10) or 10) + 1


@contextmanager
def live_from_pool(pool: Any) -> Iterator[Any]:
    """``pool.connection()``, skipping connections the server already closed.

    Every connection taken goes back to the pool whatever happens between
    ``getconn()`` and the caller's block (an error in the look, Ctrl-C): one
    kept out would be lost to the pool for good.
    """
    attempts = _attempts(pool)
    for attempt in range(attempts):
        conn = _take(pool)
        owed = True  # still ours to give back
        try:
            if attempt + 1 < attempts and is_dead(conn):
                owed = False
                _drop(pool, conn)
                continue
            with conn:  # commit/rollback on exit, as pool.connection() does
                yield conn
        finally:
            if owed:
                pool.putconn(conn)
        return


@asynccontextmanager
async def alive_from_pool(pool: Any) -> AsyncIterator[Any]:
    """Async twin of :func:`live_from_pool` (a cancel anywhere gives the
    connection back too)."""
    attempts = _attempts(pool)
    for attempt in range(attempts):
        conn = await _atake(pool)
        owed = True
        try:
            if attempt + 1 < attempts and is_dead(conn):
                owed = False
                await _adrop(pool, conn)
                continue
            async with conn:
                yield conn
        finally:
            if owed:
                await pool.putconn(conn)
        return


def _drop(pool: Any, conn: Any) -> None:
    """Close a dead connection and hand it back as broken (the pool replaces it)."""
    try:
        conn.close()
    finally:  # given back even if the close failed or was interrupted
        _discard(pool, conn)


async def _adrop(pool: Any, conn: Any) -> None:
    try:
        await conn.close()
    finally:
        await _adiscard(pool, conn)


def _discard(pool: Any, conn: Any) -> None:
    # as psycopg_pool's own failed check does: "found broken" at INFO level and a
    # replacement; putconn() would log a WARNING for every closed connection
    putconn = getattr(pool, "_putconn", None)
    if putconn is None:
        pool.putconn(conn)
    else:
        putconn(conn, from_getconn=True)


async def _adiscard(pool: Any, conn: Any) -> None:
    putconn = getattr(pool, "_putconn", None)
    if putconn is None:
        await pool.putconn(conn)
    else:
        await putconn(conn, from_getconn=True)

"""``RedisSaver`` / ``AsyncRedisSaver``: the shared storage core on plain Redis.

Only core commands and Lua (no RediSearch, no RedisJSON), so any Redis 6+,
Valkey, ElastiCache, Memorystore or Upstash works. Every key of a thread
shares one hash tag (see :mod:`.keys`), which keeps each write a single-slot
Lua script under Redis Cluster.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from typing import Any

import redis
import redis.asyncio as aredis
import redis.cluster
from redis.exceptions import NoScriptError, RedisError

from threadloom.checkpoint.lease.redis import release_guards
from threadloom.checkpoint.redis.executor import Call, RedisPlanner, Scope
from threadloom.checkpoint.redis.keys import SCRIPTS, KeyLayout
from threadloom.checkpoint.redis.retrydefault import with_default_retry
from threadloom.checkpoint.redis.threadttl import AsyncThreadTTL, SyncThreadTTL, saver_ttl
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.bridge import in_thread, run_sync
from threadloom.checkpoint.storage.core import StorageSaver
from threadloom.checkpoint.storage.drive import Flow
from threadloom.errors import ConfigError, StorageError

__all__ = ["AsyncRedisSaver", "RedisSaver"]

SHAS = {name: hashlib.sha1(body.encode()).hexdigest() for name, body in SCRIPTS.items()}


def describe(client: Any) -> str:
    """``Redis at host:port/db`` for error messages (no password)."""
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None) or {}
    if "path" in kw:
        return f"Redis at unix:{kw['path']}/{kw.get('db', 0)}"
    return f"Redis at {kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}"


def check_client(client: Any) -> None:
    """Refuse a client that would decode binary checkpoints as text."""
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None) or {}
    if kw.get("decode_responses"):
        raise ConfigError(
            "the Redis client has decode_responses=True; checkpoints are binary: "
            "pass a client created with decode_responses=False"
        )


def redis_error(exc: BaseException, target: str) -> StorageError:
    """A StorageError naming the server, chained to redis-py's error."""
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        msg = f"cannot reach {target}: {exc}"
    else:
        msg = f"{target} refused the operation: {type(exc).__name__}: {exc}"
    err = StorageError(msg)
    err.__cause__ = exc
    return err


_SCHEMES = ("redis://", "rediss://", "unix://")


def split_options(saver_cls: type, client_cls: type, options: dict[str, Any]) -> tuple[dict, dict]:
    """``from_conn_string``'s keywords as (saver options, redis-py client options).

    Saver options are the keyword parameters of the saver's constructors;
    anything else must be a keyword of ``client_cls`` (``socket_timeout``,
    ``retry``, ``client_name``, ...), checked here because redis-py itself
    only fails on an unknown one at the first command."""
    ours: set[str] = set()
    for klass in saver_cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            params = inspect.signature(init).parameters.values()
            ours.update(p.name for p in params if p.kind is p.KEYWORD_ONLY)
    ours -= {"self", "client", "options", "_owned"}
    theirs = set(inspect.signature(client_cls.__init__).parameters) - {"self", "connection_pool"}
    unknown = sorted(set(options) - ours - theirs)
    if unknown:
        raise ConfigError(
            f"{saver_cls.__name__}.from_conn_string: unknown option(s) {', '.join(unknown)}: "
            f"neither a saver option ({', '.join(sorted(ours))}) nor a {client_cls.__module__}.Redis keyword"
        )
    saver = {k: v for k, v in options.items() if k in ours}
    return saver, {k: v for k, v in options.items() if k not in ours}


def open_client(factory: Any, url: str, options: dict[str, Any]) -> Any:
    """``factory.from_url(url, **options)`` with a ConfigError for a bad URL
    (the message shows the scheme only: a URL may carry a password)."""
    if not isinstance(url, str) or not url.startswith(_SCHEMES):
        if not isinstance(url, str):
            got = f"a {type(url).__name__}"
        else:
            got = f"scheme {url.partition('://')[0]!r}" if "://" in url else "no scheme"
        raise ConfigError(f"Redis URL must start with {', '.join(_SCHEMES)}; got {got}")
    try:
        return factory.from_url(url, **with_default_retry(factory, options))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"bad Redis URL or option for {factory.__module__}: {exc}") from exc


def _evalsha_args(call: Call) -> tuple[Any, ...]:
    return (SHAS[call.script], len(call.keys), *call.keys, *call.args)  # type: ignore[index]


def _cancelling(task: asyncio.Task[Any] | None) -> int:
    """Cancel requests pending on ``task`` (``Task.cancelling``, Python 3.11+)."""
    count = getattr(task, "cancelling", None)
    return count() if count is not None else 0


def _queue(pipe: Any, call: Call) -> None:
    if call.script is None:
        pipe.execute_command(*call.args)
    else:
        pipe.evalsha(*_evalsha_args(call))


def _failed_scripts(results: list[Any]) -> list[int]:
    """Positions of scripts the server did not know (first use, restart, SCRIPT FLUSH)."""
    return [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]


def _raise_first(results: list[Any], target: str) -> list[Any]:
    for r in results:
        if isinstance(r, Exception):
            raise redis_error(r, target)
    return results


class _RedisSaverBase(StorageSaver):
    """Options shared by the sync and async savers.

    Args:
        client: a ``redis.Redis`` (or ``redis.asyncio.Redis``) with
            ``decode_responses=False``; not closed by the saver.
        key_prefix: every key starts with ``{key_prefix:``; separate prefixes
            isolate apps, tenants or test runs in one database.
        ttl: seconds a thread lives after its last write or read (None or inf =
            forever; rounded up to whole seconds).
            Every write and every checkpoint read re-arms it on all the thread's keys;
            ``set_thread_ttl`` gives one thread its own.
        serde, delta, compact_every, cache_bytes: see
            :class:`~threadloom.checkpoint.storage.core.StorageSaver`.
    """

    shares_blobs_across_threads = False  # per-thread blobs: one slot per thread
    torn_reads = True  # a read is several commands: a torn one runs again (storage/rereads.py)

    def __init__(
        self,
        client: Any,
        *,
        key_prefix: str = "threadloom",
        ttl: int | None = None,
        serde: Any = None,
        _owned: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(serde=serde, **options)
        # the WRITES script always checks SaveWrites.expected (compare-and-set), so a
        # task's first put_writes need not read its row first; it also takes the
        # row's blob references when asked (SaveWrites.add_refs)
        self.codec.strict_writes = self.codec.writes_add_refs = True
        check_client(client)
        ttl = saver_ttl(ttl)
        self.client = client
        self.layout = KeyLayout(key_prefix)
        self.planner = RedisPlanner(self.layout, ttl)
        self.ttl = ttl
        self.target = describe(client)
        self._owned = _owned
        self.cluster = isinstance(client, (redis.cluster.RedisCluster, aredis.RedisCluster))
        self._scope: ContextVar[Scope | None] = ContextVar(f"tl_redis_{id(self)}", default=None)

    def setup(self) -> None:
        """Nothing to create on Redis; kept for API symmetry with the SQL savers."""

    def _current(self) -> Scope:
        scope = self._scope.get()
        return scope if scope is not None else Scope()

    def _closed_under(self, exc: BaseException) -> None:
        """A command failed after the saver closed its client under it (another
        thread was mid-command): redis-py then raises whatever the torn socket
        gave (ValueError, AttributeError, OSError, ConnectionError); the caller
        gets ``SaverClosedError`` instead, as a call after the close would."""
        if self._closed:
            from threadloom.errors import SaverClosedError

            raise SaverClosedError(type(self).__name__) from exc


class RedisSaver(SyncThreadTTL, _RedisSaverBase):
    """Checkpoints in Redis (sync client). See :class:`_RedisSaverBase` for options."""

    @classmethod
    @contextmanager
    def from_conn_string(cls, url: str, **options: Any) -> Iterator[RedisSaver]:
        """Open a client for ``url`` (``redis://``, ``rediss://``, ``unix://``), close it on exit.

        ``options``: the saver's own (``key_prefix``, ``ttl``, ``serde``, ...) and
        any ``redis.Redis`` keyword (``socket_timeout=5``, ``retry=...``), which
        go to the client; an unknown name or a bad URL raises ``ConfigError``."""
        mine, theirs = split_options(cls, redis.Redis, options)
        client = open_client(redis.Redis, url, theirs)
        try:
            saver = cls(client, _owned=True, **mine)
        except BaseException:
            client.close()
            raise
        try:
            yield saver
        finally:
            saver.close()

    def close(self) -> None:
        """Close the client the saver opened, after settling or releasing the runs
        writing through it; then refuse every call (redis-py would reconnect)."""
        if self._owned:
            self._close_once(self._shut)

    def _shut(self) -> None:
        if self._closed:
            return
        try:
            self._close_runs()
        finally:
            self._closed = True
            self.client.close()

    # -- executor interface for the storage driver ----------------------------

    @contextmanager
    def transaction(self, write: bool) -> Iterator[None]:
        scope = Scope(write=write)
        token = self._scope.set(scope)
        try:
            yield
        finally:
            self._scope.reset(token)
            if scope.guards:  # retention's guard leases (lease/redis.py), even on failure
                with suppress(StorageError):  # unreleased, a guard expires after its TTL
                    self._send(release_guards(scope.guards, Call))

    def execute(self, op: Any) -> Any:
        return self._drive(self.planner.plan(op, self._current()))

    def _send(self, calls: Sequence[Call]) -> list[Any]:
        """One round trip for the batch (a pipeline); call by call on a cluster,
        whose pipelines refuse EVALSHA."""
        if self._closed:  # every command: redis-py would reconnect a closed client
            self._refuse_closed()
        try:
            if self.cluster or len(calls) == 1:
                return [self._one(call) for call in calls]
            pipe = self.client.pipeline(transaction=False)
            for call in calls:
                _queue(pipe, call)
            results = pipe.execute(raise_on_error=False)
            for i in _failed_scripts(results):  # first use on this server
                results[i] = self._one(calls[i])
        except Exception as exc:
            self._closed_under(exc)
            if not isinstance(exc, RedisError):
                raise
            raise redis_error(exc, self.target) from exc
        return _raise_first(results, self.target)

    def _one(self, call: Call) -> Any:
        if call.script is None:
            return self.client.execute_command(*call.args)
        try:
            return self.client.evalsha(*_evalsha_args(call))
        except NoScriptError:
            self.client.script_load(SCRIPTS[call.script])
            return self.client.evalsha(*_evalsha_args(call))

    # -- how the core's flows run ------------------------------------------------

    def _run(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:
            self._refuse_closed()
        return drive.run(flow, self, write)

    def _iter(self, flow: Flow) -> Iterator[Any]:
        if self._closed:
            self._refuse_closed()
        return drive.iterate(flow, self)

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:
            self._refuse_closed()
        return await in_thread(drive.run, flow, self, write)

    async def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        if self._closed:
            self._refuse_closed()
        for item in await in_thread(lambda: list(drive.iterate(flow, self))):
            yield item


class AsyncRedisSaver(AsyncThreadTTL, _RedisSaverBase):
    """Checkpoints in Redis from asyncio code (``redis.asyncio.Redis`` client)."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, url: str, **options: Any) -> AsyncIterator[AsyncRedisSaver]:
        """Async twin of :meth:`RedisSaver.from_conn_string` (same options)."""
        mine, theirs = split_options(cls, aredis.Redis, options)
        client = open_client(aredis.Redis, url, theirs)
        try:
            saver = cls(client, _owned=True, **mine)
        except BaseException:
            await client.aclose()
            raise
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:
        """Nothing to create on Redis; awaitable like AsyncPostgresSaver.setup()."""

    async def aclose(self) -> None:
        """:meth:`RedisSaver.close`'s async twin; on a caller's client only runs
        dropped mid-stream get to save and release first."""
        await self._aclose_own(self._owned, self.client.aclose)

    def close(self) -> None:
        """Sync close is a no-op for the async saver; use ``await saver.aclose()``."""

    def __init__(self, client: Any, **options: Any) -> None:
        super().__init__(client, **options)
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @asynccontextmanager
    async def atransaction(self, write: bool) -> AsyncIterator[None]:
        scope = Scope(write=write)
        token = self._scope.set(scope)
        try:
            yield
        finally:
            self._scope.reset(token)
            if scope.guards:
                with suppress(StorageError):
                    await self._send(release_guards(scope.guards, Call))

    async def aexecute(self, op: Any) -> Any:
        plan = self.planner.plan(op, self._current())
        results: Any = None
        while True:
            try:
                batch = plan.send(results)
            except StopIteration as stop:
                return stop.value
            results = await self._send(batch)

    async def _send(self, calls: Sequence[Call]) -> list[Any]:
        if self._closed:
            self._refuse_closed()
        task = asyncio.current_task()
        cancels = _cancelling(task)
        try:
            if self.cluster or len(calls) == 1:
                results = [await self._one(call) for call in calls]
            else:
                pipe = self.client.pipeline(transaction=False)
                for call in calls:
                    _queue(pipe, call)
                results = await pipe.execute(raise_on_error=False)
                for i in _failed_scripts(results):
                    results[i] = await self._one(calls[i])
        except Exception as exc:
            self._closed_under(exc)
            if not isinstance(exc, RedisError):
                raise
            raise redis_error(exc, self.target) from exc
        if _cancelling(task) > cancels:
            # redis-py sends through asyncio.wait_for, which on Python < 3.12
            # swallows a cancel landing as the send completes: the commands ran
            # (as if the cancel came just after), the cancel is raised here
            raise asyncio.CancelledError
        return _raise_first(results, self.target)

    async def _one(self, call: Call) -> Any:
        if call.script is None:
            return await self.client.execute_command(*call.args)
        try:
            return await self.client.evalsha(*_evalsha_args(call))
        except NoScriptError:
            await self.client.script_load(SCRIPTS[call.script])
            return await self.client.evalsha(*_evalsha_args(call))

    async def _arun(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:
            self._refuse_closed()
        return await drive.arun(flow, self, write)

    def _aiter(self, flow: Flow) -> AsyncIterator[Any]:
        if self._closed:
            self._refuse_closed()
        return drive.aiterate(flow, self)

    def _run(self, flow: Flow, write: bool = False) -> Any:
        if self._closed:  # before the bridge: the saver's loop may be gone too
            self._refuse_closed()
        return self._sync(drive.arun(flow, self, write))

    def _iter(self, flow: Flow) -> Iterator[Any]:
        if self._closed:
            self._refuse_closed()

        async def collect() -> list[Any]:
            return [item async for item in drive.aiterate(flow, self)]

        return iter(self._sync(collect()))

    def _sync(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the saver's loop from another thread; never on the loop itself."""
        return run_sync(coro, self.loop, "AsyncRedisSaver")

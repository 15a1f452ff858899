"""One writer per thread: leases around root runs, and what a second run does.

A root run on a thread takes the thread's lease (see
:mod:`threadloom.checkpoint.lease`) before it reads the latest checkpoint and
releases it when it ends. Its saves go through a
:class:`~threadloom.checkpoint.lease.FencedSaver`, so a run that lost its lease
writes nothing. When the thread is busy, ``multitask_strategy`` decides:

- ``"reject"`` (default): raise :class:`ThreadBusyError` naming the thread and
  the run holding it.
- ``"enqueue"``: wait for the lease (``multitask_timeout`` seconds, default 30).
- ``"interrupt"``: ask the holder to stop at its next step boundary (its
  checkpoints are kept), then run.
- ``"rollback"``: ask the holder to stop and delete the checkpoints it stored,
  then run.

Leases are on by default for threadloom's savers (memory, SQLite, Postgres,
Redis). Subgraphs run under their parent's lease; ``get_state`` and friends
take none. Opt out per call with ``lease=False`` or per saver with
``saver.leases = False``. See docs/concurrency.md.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from threadloom.checkpoint.lease import closing, local
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import (
    DEFAULT_TTL,
    FencedSaver,
    Lease,
    _uncut,
    alease_backend,
    lease_backend,
)
from threadloom.errors import (
    ConfigError,
    GraphDrained,
    LeaseLostError,
    SaverClosedError,
    ThreadBusyError,
)
from threadloom.pregel.run_end import (
    arelease,
    arelease_anyway,
    asave_owed,
    once_more_on_ctrl_c,
    release,
    release_anyway,
    save_owed,
)

__all__ = ["STRATEGIES", "DEFAULT_TIMEOUT", "astate_lease", "astream", "state_lease", "stream"]

STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")
DEFAULT_TIMEOUT = 30.0
_POLL_MIN, _POLL_MAX = 0.01, 0.25


@dataclass
class _Spec:
    saver: Any
    thread_id: str
    holder: str
    strategy: str
    timeout: float
    ttl: float
    control: Any = None  # the run's RunControl: a drain stops a wait for the thread


def _spec(graph: Any, config: Any, kwargs: dict[str, Any]) -> _Spec | None:
    """What to lease, or None (no checkpointer, nested run, opted out). Pops our kwargs."""
    from threadloom.pregel.options import parent_scope

    strategy = kwargs.pop("multitask_strategy", None)
    timeout = kwargs.pop("multitask_timeout", None)
    wanted = kwargs.pop("lease", None)
    if strategy is not None and strategy not in STRATEGIES:
        raise ConfigError(f"multitask_strategy must be one of {STRATEGIES}, got {strategy!r}")
    saver = graph.checkpointer
    if saver in (None, False, True) or wanted is False or parent_scope(config) is not None:
        return None
    if wanted is None and not getattr(saver, "leases", True):
        return None
    conf = (config or {}).get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None:
        return None
    holder = str(conf.get("run_id") or config.get("run_id") or uuid.uuid4())
    return _Spec(
        saver,
        str(thread_id),
        holder,
        strategy or getattr(saver, "multitask_strategy", "reject"),
        float(DEFAULT_TIMEOUT if timeout is None else timeout),
        float(getattr(saver, "lease_ttl", DEFAULT_TTL)),
        kwargs.get("control"),
    )


def _no_backend(spec: _Spec, explicit: bool) -> None:
    if explicit:
        raise ConfigError(
            f"{type(spec.saver).__name__} cannot hold thread leases;"
            " multitask_strategy needs a threadloom saver (memory, SQLite, Postgres, Redis)"
        )


def _busy(spec: _Spec, info: lo.LeaseInfo | None, waited: bool) -> ThreadBusyError:
    holder = info.holder if info is not None else None
    tail = f" after waiting {spec.timeout:g}s" if waited else ""
    msg = (
        f"thread {spec.thread_id!r} is busy: run {holder!r} holds it{tail}"
        f" (multitask_strategy={spec.strategy!r}; use 'enqueue', 'interrupt' or 'rollback'"
        " to wait for it or stop it)"
    )
    return ThreadBusyError(spec.thread_id, holder, msg)


def _take(spec: _Spec, held: local.Holding) -> Lease:
    """Take the lease and record it in ``held`` (lease/local.py), past the
    saver's close gate: a close that began meanwhile refuses the run, or waits
    until its lease is recorded and then releases it."""
    closing.enter(spec.saver, spec.thread_id)
    try:
        lease = _acquire(spec)
        local.hold(held, lease.token, thread=spec.thread_id, saver=spec.saver, lease=lease)
        return lease
    finally:
        closing.leave(spec.saver)


async def _atake(spec: _Spec, held: local.Holding) -> Lease:
    """Async twin of :func:`_take`."""
    closing.enter(spec.saver, spec.thread_id)
    try:
        lease = await _aacquire(spec)
        loop = asyncio.get_running_loop()
        local.hold(held, lease.token, loop, spec.thread_id, spec.saver, lease)
        return lease
    finally:
        closing.leave(spec.saver)


def _closing(spec: _Spec) -> None:
    """A run waiting for the thread gives up once its saver is closing (the
    close waits for it: :func:`_take`), or once its ``RunControl`` asks it to
    drain: it has written nothing yet, and a deploy's grace period must not go
    to waiting for another run (GraphDrained, resumable as any drained run)."""
    if getattr(spec.saver, "_closing", False):
        raise SaverClosedError(type(spec.saver).__name__, spec.thread_id)
    control = spec.control
    if control is not None and getattr(control, "drain_requested", False):
        raise GraphDrained(control.drain_reason or "shutdown")


def _acquire(spec: _Spec) -> Lease:
    """Take the lease per the strategy, or raise ThreadBusyError.

    A holder that is a run of this process with no step left (its stream is
    closing, or was dropped by its caller) is waited for first, whatever the
    strategy (up to ``spec.timeout``): it is releasing, not writing (see
    :mod:`threadloom.checkpoint.lease.local`)."""
    lease = Lease(spec.saver, spec.thread_id, spec.holder, spec.ttl)
    info = lease.try_acquire()
    if info is None:
        return lease
    deadline = time.monotonic() + spec.timeout
    ending = local.finishing(info.token)
    if ending is not None and local.wait(ending, spec.timeout):
        info = lease.try_acquire()
        if info is None:
            return lease
    if spec.strategy == "reject":
        raise _busy(spec, info, False)
    delay, asked = _POLL_MIN, False
    try:
        while True:
            _closing(spec)  # first: a drained run stops no one (a rollback deletes their work)
            if spec.strategy in ("interrupt", "rollback"):
                spec.saver._run(lo.request_stop_flow(spec.thread_id, spec.strategy), True)
                asked = True
            if time.monotonic() >= deadline:
                raise _busy(spec, info, True)
            time.sleep(delay)
            delay = min(_POLL_MAX, delay * 2)
            info = lease.try_acquire()
            if info is None:
                return lease
    except BaseException:
        if asked:  # we gave up: the holder must not stop, or be rolled back, for nobody
            _withdraw(spec)
        raise


def _withdraw(spec: _Spec) -> None:
    """Take back our stop request, once more if a Ctrl-C cut it short (a second
    Ctrl-C must not leave the holder to be stopped for nobody)."""

    def send() -> None:
        spec.saver._run(lo.withdraw_stop_flow(spec.thread_id, spec.strategy), True)

    try:
        once_more_on_ctrl_c(send)
    except Exception:  # the store is failing: the request goes with the lease
        pass


async def _aacquire(spec: _Spec) -> Lease:
    lease = Lease(spec.saver, spec.thread_id, spec.holder, spec.ttl)
    info = await lease.atry_acquire()
    if info is None:
        return lease
    deadline = time.monotonic() + spec.timeout
    ending = await local.afinishing(info.token)
    if ending is not None and await local.await_release(ending, spec.timeout):
        info = await lease.atry_acquire()
        if info is None:
            return lease
    if spec.strategy == "reject":
        raise _busy(spec, info, False)
    delay, asked = _POLL_MIN, False
    try:
        while True:
            _closing(spec)  # first: a drained run stops no one (a rollback deletes their work)
            if spec.strategy in ("interrupt", "rollback"):
                await spec.saver._arun(lo.request_stop_flow(spec.thread_id, spec.strategy), True)
                asked = True
            if time.monotonic() >= deadline:
                raise _busy(spec, info, True)
            await asyncio.sleep(delay)
            delay = min(_POLL_MAX, delay * 2)
            info = await lease.atry_acquire()
            if info is None:
                return lease
    except BaseException:
        if asked:  # as _acquire; sent to its end even if we are cancelled again
            flow = lo.withdraw_stop_flow(spec.thread_id, spec.strategy)
            try:
                await _uncut(spec.saver._arun(flow, True))
            except Exception:
                pass
        raise


def stream(
    graph: Any, input: Any, config: Any, kwargs: dict[str, Any], inner: Callable[..., Any]
) -> Iterator[Any]:
    """Run ``inner`` (the sync driver) under the thread's lease."""
    explicit = kwargs.get("multitask_strategy") is not None
    spec = _spec(graph, config, kwargs)
    if spec is None or lease_backend(spec.saver) is None:
        if spec is not None:
            _no_backend(spec, explicit)
        yield from inner(graph, input, config, kwargs)
        return
    held = local.Holding()
    lease = _take(spec, held)
    try:
        fenced = FencedSaver(spec.saver, lease)
        lease.start_renewal()
        run = inner(graph.copy(checkpointer=fenced), input, config, kwargs)
        try:
            try:
                for chunk in run:  # noqa: UP028 (yield from would close run before ending is set)
                    yield chunk
            finally:
                held.ending = True  # no further step: save what is owed, then release
                run.close()
        except LeaseLostError:
            if lease.stop == "rollback" and not lease.lost:
                spec.saver._run(fenced.rollback_flow(), True)
            raise
    finally:
        try:
            save_owed(lease)
        finally:
            try:
                lease.halt()
                release_anyway(lease)
            finally:
                local.drop(held)


def astream(
    graph: Any, input: Any, config: Any, kwargs: dict[str, Any], inner: Callable[..., Any]
) -> AsyncIterator[Any]:
    """Async twin of :func:`stream`. The generator is weakly known to its lease
    record (lease/local.py): once the caller drops it, a new run on the thread
    waits for its closing instead of being refused."""
    held = local.Holding()
    gen = _astream(graph, input, config, kwargs, inner, held)
    held.gen = weakref.ref(gen)
    return gen


async def _astream(
    graph: Any,
    input: Any,
    config: Any,
    kwargs: dict[str, Any],
    inner: Callable[..., Any],
    held: local.Holding,
) -> AsyncIterator[Any]:
    """Leaving early (``break``, ``aclose()``) closes the driver before the lease
    goes: its last saves run under the lease. Left to the loop's finalizer, they
    ran after the release, found the lease gone and stored nothing."""
    explicit = kwargs.get("multitask_strategy") is not None
    spec = _spec(graph, config, kwargs)
    if spec is None or await alease_backend(spec.saver) is None:
        if spec is not None:
            _no_backend(spec, explicit)
        async with aclosing(inner(graph, input, config, kwargs)) as run:
            async for chunk in run:
                yield chunk
        return
    lease = await _atake(spec, held)
    stopping = False  # a cancel or a broken-off stream: the owed saves get a short grace
    try:
        fenced = FencedSaver(spec.saver, lease)
        lease.astart_renewal()
        run = inner(graph.copy(checkpointer=fenced), input, config, kwargs)
        try:
            try:
                async for chunk in run:
                    yield chunk
            finally:
                held.ending = True  # no further step: save what is owed, then release
                await run.aclose()
        except LeaseLostError:
            if lease.stop == "rollback" and not lease.lost:
                await spec.saver._arun(fenced.rollback_flow(), True)
            raise
    except (asyncio.CancelledError, GeneratorExit):
        stopping = True
        raise
    finally:
        try:
            await asave_owed(lease, stopping)
        finally:
            try:
                await lease.ahalt()
                await arelease_anyway(lease)
            finally:
                local.drop(held)


@contextmanager
def state_lease(graph: Any, config: Any) -> Iterator[Any]:
    """``update_state`` under the thread's lease: the graph to write through.

    A state update while a run holds the thread would fork its history, so it
    is refused (ThreadBusyError naming the run); while nothing runs it takes
    the lease for the update's own writes. Inside a node (a scope is active)
    it writes under the running graph's lease, as before.
    """
    kwargs: dict[str, Any] = {}
    spec = _spec(graph, config or {}, kwargs)
    if spec is None or lease_backend(spec.saver) is None:
        yield graph
        return
    spec.strategy = "reject"
    held = local.Holding()  # recorded: a close of the saver meanwhile releases it
    lease = _take(spec, held)
    try:
        yield graph.copy(checkpointer=FencedSaver(spec.saver, lease))
    finally:
        try:
            release(lease)
        finally:
            local.drop(held)


@asynccontextmanager
async def astate_lease(graph: Any, config: Any) -> AsyncIterator[Any]:
    """Async twin of :func:`state_lease`."""
    kwargs: dict[str, Any] = {}
    spec = _spec(graph, config or {}, kwargs)
    if spec is None or await alease_backend(spec.saver) is None:
        yield graph
        return
    spec.strategy = "reject"
    held = local.Holding()
    lease = await _atake(spec, held)
    try:
        yield graph.copy(checkpointer=FencedSaver(spec.saver, lease))
    finally:
        try:
            await arelease(lease)
        finally:
            local.drop(held)

"""Lease operations: the storage ops a thread lease needs, and the flows using them.

A lease row per thread says which run may write it: ``holder`` (the run id,
for error messages), ``token`` (a fresh uuid per acquisition, the *fencing
token*), an expiry, and ``stop`` (a stop request from another run: ``""``,
``"interrupt"`` or ``"rollback"``). Each backend answers these ops inside the
executor's transaction (SQLite ``BEGIN IMMEDIATE``, Postgres row locks, Redis
one Lua script, memory the executor lock), so :class:`CheckLease` yielded
first in a write flow makes "is my lease still valid" and "store the
checkpoint" one atomic step: a writer that lost its lease stores nothing.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from threadloom.errors import LeaseLostError, ThreadBusyError

__all__ = [
    "AcquireLease",
    "RenewLease",
    "ReleaseLease",
    "RequestStop",
    "CheckLease",
    "ReadLease",
    "LeaseInfo",
    "LEASE_OPS",
    "acquire_flow",
    "renew_flow",
    "release_flow",
    "request_stop_flow",
    "withdraw_stop_flow",
    "read_flow",
    "check_flow",
]


@dataclass(frozen=True)
class LeaseInfo:
    """The live lease of a thread as a backend reports it."""

    holder: str
    token: str
    expires_in_ms: int
    stop: str = ""


@dataclass(frozen=True)
class AcquireLease:
    """Take the lease if free, expired, or held by ``steal`` (a token whose process is
    known dead). Result: None when taken, else the live LeaseInfo."""

    thread_id: str
    holder: str
    token: str
    ttl_ms: int
    steal: str = ""

    def _replace_steal(self, token: str) -> AcquireLease:
        return AcquireLease(self.thread_id, self.holder, self.token, self.ttl_ms, token)


@dataclass(frozen=True)
class RenewLease:
    """Extend our lease. Result: None when lost, else our LeaseInfo (``stop`` = request)."""

    thread_id: str
    token: str
    ttl_ms: int


@dataclass(frozen=True)
class ReleaseLease:
    """Drop our lease (no-op when it is no longer ours). Result: None."""

    thread_id: str
    token: str


@dataclass(frozen=True)
class RequestStop:
    """Ask the live holder to stop (``withdraw``: take back a request of ``mode``
    not acted on yet, when the run that asked gave up waiting). Result: the
    LeaseInfo it was set on, or None."""

    thread_id: str
    mode: str
    withdraw: bool = False


@dataclass(frozen=True)
class CheckLease:
    """Fence + renewal: when ``token`` holds a live lease, extend it by ``ttl_ms`` and
    return its stop request (``""`` for none); otherwise return None."""

    thread_id: str
    token: str
    ttl_ms: int


@dataclass(frozen=True)
class ReadLease:
    """Result: the live LeaseInfo of the thread, or None."""

    thread_id: str


LEASE_OPS = (AcquireLease, RenewLease, ReleaseLease, RequestStop, CheckLease, ReadLease)

Flow = Generator[Any, Any, Any]


def acquire_flow(thread_id: str, holder: str, token: str, ttl_ms: int) -> Flow:
    """Take the lease or raise ThreadBusyError naming the holder."""
    live = yield AcquireLease(thread_id, holder, token, ttl_ms, "")
    if live is not None:
        raise ThreadBusyError(thread_id, live.holder)
    return None


def renew_flow(thread_id: str, token: str, ttl_ms: int, holder: str = "") -> Flow:
    """Extend the lease; return the stop request (``""`` for none).

    Raises:
        LeaseLostError: the lease expired and was taken, or released.
    """
    info = yield RenewLease(thread_id, token, ttl_ms)
    if info is None:
        raise lost(thread_id, holder)
    return info.stop


def release_flow(thread_id: str, token: str) -> Flow:
    yield ReleaseLease(thread_id, token)
    return None


def request_stop_flow(thread_id: str, mode: str) -> Flow:
    return (yield RequestStop(thread_id, mode))


def withdraw_stop_flow(thread_id: str, mode: str) -> Flow:
    return (yield RequestStop(thread_id, mode, withdraw=True))


def read_flow(thread_id: str) -> Flow:
    return (yield ReadLease(thread_id))


def check_flow(thread_id: str, token: str, ttl_ms: int, holder: str = "") -> Flow:
    """The fence: raise LeaseLostError (inside the write transaction) unless we hold
    the lease; return the stop request."""
    stop = yield CheckLease(thread_id, token, ttl_ms)
    if stop is None:
        raise lost(thread_id, holder)
    return stop


def lost(thread_id: str, holder: str) -> LeaseLostError:
    who = f"run {holder!r}" if holder else "this run"
    return LeaseLostError(
        thread_id,
        holder or None,
        f"{who} lost its lease on thread {thread_id!r} (expired or taken over);"
        " nothing was written",
    )

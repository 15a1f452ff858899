"""Retention over many threads in bounded transactions.

``prune`` and ``delete_for_runs`` over many threads ran as ONE write
transaction: 75,000 threads held SQLite's write lock for 84 s (other
processes' ``invoke`` failed with "stayed locked past busy_timeout"), and on
Postgres each thread's advisory lock stayed held to the end (25,000 ids ran
out of ``max_locks_per_transaction``, even for ids that did not exist).

A *plan* here is a generator that yields ``(flow, write)`` steps, each run by
the saver in a transaction of its own, and returns the call's result; the
sync and async methods drive the same plan (:func:`run_plan`,
:func:`arun_plan`). Every thread is handled wholly inside one step (pruned
wholly or not at all), and each step is guarded again in its own transaction:
a run that takes a thread's lease after the up-front check stops the call at
that thread's step (ThreadBusyError), with the steps before it committed.

Step size adapts to a time budget (``TARGET_SECONDS`` per write transaction:
a step grows while it takes under 25 ms and halves above 100 ms), so other
writers get in between steps, and is capped at ``MAX_THREADS`` threads, which
bounds the locks one Postgres transaction holds. Small threads hit the cap
first (SQLite, 100 threads of 4 checkpoints: a prune step ~50 ms, a
``delete_for_runs`` step ~13 ms).

A lock that does not queue its waiters needs more than a gap: SQLite's busy
handler polls (every 100 ms once it has waited a while), so a writer of
another process hardly ever hit the microseconds between two steps and still
waited 2-10 s behind a 20 s prune. A saver whose ``retention_pause`` is above
0 (SQLite files: 1.0) rests that many times each write step's duration
before the next (:class:`Pause`): a waiting writer gets the lock within about
one poll, and the call takes about twice as long (measured, 4,000 threads on a
SQLite file: prune 2.0 s -> 3.9 s, delete_for_runs 0.7 s -> 1.2 s, its
read steps not rested). Postgres queues lock waiters and needs no rest, nor
does an in-memory SQLite database (no other process can wait on it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, NamedTuple

from threadloom.checkpoint.base import PruneReport
from threadloom.checkpoint.storage.ops import FindRunCheckpoints
from threadloom.checkpoint.storage.retention import (
    CheckedBefore,
    check_before_flow,
    check_strategy,
    guard_flow,
)

__all__ = [
    "CheckedBefore",
    "Pause",
    "Steps",
    "arun_plan",
    "delete_for_runs_plan",
    "prune_plan",
    "run_plan",
]

Flow = Generator[Any, Any, Any]
Plan = Generator[tuple[Flow, bool], Any, Any]

TARGET_SECONDS = 0.05
"""A write step grows while it takes under half this, shrinks above twice it."""
MAX_THREADS = 100
"""Threads per write transaction at most (Postgres: one advisory lock each)."""


class Pause(NamedTuple):
    """Yielded by a plan between two write steps: rest ``seconds`` (no lock held)."""

    seconds: float


class Steps:
    """Cuts ids into steps whose size follows how long the last one took;
    ``pause``: rest this many times a write step's duration after it."""

    def __init__(self, first: int = 8, cap: int | None = None, pause: float = 0.0) -> None:
        self.cap = MAX_THREADS if cap is None else cap  # read now: tests lower it
        self.size = max(1, min(first, self.cap))
        self.pause = pause

    def take(self, ids: Sequence[str], start: int) -> list[str]:
        return list(ids[start : start + self.size])

    def took(self, seconds: float) -> None:
        if seconds < TARGET_SECONDS / 2:
            self.size = min(self.cap, self.size * 2)
        elif seconds > TARGET_SECONDS * 2:
            self.size = max(1, self.size // 2)


def _write_steps(ids: Sequence[str], make: Callable[[list[str]], Flow], steps: Steps) -> Plan:
    """``make(chunk)`` for consecutive chunks of ``ids``, each a write step;
    returns their results in order."""
    results = []
    start, took = 0, 0.0
    while start < len(ids):
        if start and steps.pause > 0:
            yield Pause(min(steps.pause * took, 1.0))
        chunk = steps.take(ids, start)
        began = time.monotonic()
        results.append((yield make(chunk), True))
        took = time.monotonic() - began
        steps.took(took)
        start += len(chunk)
    return results


def prune_plan(
    make: Callable[[list[str], str | None], Flow],
    thread_ids: list[str],
    strategy: str,
    keep_last: int | None,
    before: str | None,
    dry_run: bool,
    guard: bool,
    pause: float = 0.0,
) -> Plan:
    """``prune`` as steps. ``make(ids, before)`` builds the prune flow of some
    threads. A dry run is ONE read transaction: it writes and locks nothing,
    and counts shared blobs across all threads the way the chunked real run
    leaves them. ``before`` is checked once for all threads. ``guard``: refuse
    up front, before any step writes, when a run holds a lease of one of the
    threads (each step checks its own threads again, in its transaction).
    ``pause``: the saver's ``retention_pause`` (module docstring)."""
    check_strategy(strategy, keep_last)
    if dry_run:
        return (yield make(thread_ids, before), False)
    ids = list(dict.fromkeys(thread_ids))
    if strategy == "before":
        yield check_before_flow(ids, before), False
        before = CheckedBefore(before)
    if guard:
        yield guard_flow("prune", ids, False), False
    reports = yield from _write_steps(ids, lambda chunk: make(chunk, before), Steps(pause=pause))
    return add_reports(reports)


def add_reports(reports: Sequence[Any]) -> PruneReport:
    """One report of several steps' (a step with nothing to prune may report None)."""
    totals = [0, 0, 0, 0]
    for report in reports:
        if report is None:
            continue
        for i in range(4):
            totals[i] += report[i]
    return PruneReport(*totals, dry_run=False)


def run_threads_flow(run_ids: tuple[str, ...]) -> Flow:
    """The threads holding checkpoints of the runs, in the order found."""
    found = yield FindRunCheckpoints(run_ids)
    return list(dict.fromkeys(row.thread_id for row in found))


def delete_for_runs_plan(
    make: Callable[[list[str]], Flow],
    run_ids: list[str],
    guard: bool,
    pause: float = 0.0,
) -> Plan:
    """``delete_for_runs`` as steps of whole threads. The threads are found
    first (a read, the one search of all the runs; not timed as a step), then
    found again after the steps: a thread the runs wrote to meanwhile is
    handled too (each thread once). ``make(threads)`` reads only those
    threads' rows: a step that searched every run again (then kept its own
    threads) repeated the search per step, and shrank to 1-3 threads as the
    search outgrew the time budget (5,000 runs on SQLite: 0.9 s -> 220 s)."""
    if not run_ids:
        return None
    key = tuple(str(r) for r in run_ids)
    steps = Steps(pause=pause)
    done: set[str] = set()
    threads = yield run_threads_flow(key), False
    if guard:
        yield guard_flow("delete_for_runs", threads, False), False
    while todo := [t for t in threads if t not in done]:
        yield from _write_steps(todo, make, steps)
        done.update(todo)
        threads = yield run_threads_flow(key), False
    return None


def run_plan(plan: Plan, run: Callable[[Flow, bool], Any]) -> Any:
    """Drive ``plan``, each step through ``run(flow, write)`` (a saver's ``_run``)."""
    result = None
    while True:
        try:
            step = plan.send(result)
        except StopIteration as stop:
            return stop.value
        if type(step) is Pause:
            time.sleep(step.seconds)
            result = None
        else:
            result = run(*step)


async def arun_plan(plan: Plan, run: Callable[[Flow, bool], Any]) -> Any:
    """Async twin of :func:`run_plan` (``run``: a saver's ``_arun``)."""
    result = None
    while True:
        try:
            step = plan.send(result)
        except StopIteration as stop:
            return stop.value
        if type(step) is Pause:
            await asyncio.sleep(step.seconds)
            result = None
        else:
            result = await run(*step)

"""``run_once``: a flow the storage driver must run exactly once (no optimistic
first run that a refused commit would start over, no torn-read re-run). The
Postgres lease acquire is one: it stores what it read on the ``Lease``, and an
optimistic run would guess that read's pending writes empty."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import pytest

from tests.concurrency.test_async_savers import _open
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import Lease, _pg_acquire_flow
from threadloom.checkpoint.storage import drive
from threadloom.checkpoint.storage.rereads import Reread, run_once
from threadloom.errors import CorruptBlobError


class Recorder:
    """An executor offering optimistic transactions; records which ran."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.depth = 0

    def in_transaction(self) -> bool:
        return self.depth > 0

    @contextmanager
    def _tx(self, kind: str) -> Any:
        self.opened.append(kind)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def optimistic_transaction(self, write: bool) -> Any:
        return self._tx("optimistic")

    def transaction(self, write: bool) -> Any:
        return self._tx("plain")

    def execute(self, op: Any) -> Any:
        return f"answer to {op}"


class Box:
    """A non-plain argument: something a flow can store its result on."""

    seen: Any = None


def plain_flow(box: Box, ask: str) -> Any:
    box.seen = yield ask
    return box.seen


@run_once
def once_flow(box: Box, ask: str) -> Any:
    box.seen = yield ask
    return box.seen


def test_the_driver_runs_a_marked_flow_once_and_not_optimistically():
    executor = Recorder()
    assert drive.run(plain_flow(Box(), "q"), executor, True) == "answer to q"
    assert executor.opened == ["optimistic"]  # the same shape unmarked: optimistic first
    executor.opened.clear()
    box = Box()
    assert drive.run(once_flow(box, "q"), executor, True) == "answer to q"
    assert executor.opened == ["plain"] and box.seen == "answer to q"


def test_a_marked_flow_is_not_rebuilt():
    assert drive._restarter(plain_flow(Box(), "q")) is not None
    assert drive._restarter(once_flow(Box(), "q")) is None
    torn = CorruptBlobError("blob missing", thread_id="t")
    assert Reread(plain_flow(Box(), "q")).build(torn) is not None
    assert Reread(once_flow(Box(), "q")).build(torn) is None


def test_the_postgres_acquire_flow_is_marked():
    lease = Lease.__new__(Lease)
    lease.thread_id = "t"
    op = lo.AcquireLease("t", "run-A", "tok", 1000)
    flow = _pg_acquire_flow(lease, op)
    assert flow.gi_code.co_freevars == ()  # a plain function now, not a closure
    assert drive._restarter(flow) is None
    flow.close()


@pytest.mark.parametrize("kind", ["postgres"])
async def test_the_postgres_acquire_runs_in_a_plain_transaction(kind, tmp_path, request):
    async with _open(kind, tmp_path, request) as saver:
        executor = saver.executor
        opened: list[str] = []
        real_opt, real_tx = executor.aoptimistic_transaction, executor.atransaction

        def optimistic(write: bool) -> Any:
            opened.append("optimistic")
            return real_opt(write)

        def plain(write: bool) -> Any:
            opened.append("plain")
            return real_tx(write)

        executor.aoptimistic_transaction, executor.atransaction = optimistic, plain
        lease = Lease(saver, "t", "run-A", 60.0)
        assert lease.prefetch == "postgres"
        assert await lease.atry_acquire() is None
        assert opened == ["plain"]
        assert lease.first is None  # read in the acquire: the thread has no checkpoint
        await lease.arelease()

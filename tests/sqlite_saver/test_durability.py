"""synchronous=FULL: a transaction holding only the run's own lease op commits
at NORMAL (no fsync; sqlite/durability.py), every other write commits at FULL,
and a 10-node chain costs one fsync'd commit per step plus the input's."""

from __future__ import annotations

import pytest

from tests.concurrency.graphs import counting_chain
from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.checkpoint.sqlite.durability import LEVEL
from threadloom.errors import StorageError

RELAX = "PRAGMA synchronous = NORMAL"
FULL = 2  # PRAGMA synchronous's answer for FULL


def _one(op):
    return (yield op)


def _acquire(thread_id: str = "t") -> lo.AcquireLease:
    return lo.AcquireLease(thread_id, "me", str(uuid6()), 60_000)


def _top(trace: list[str]) -> list[str]:
    """The executor's statements (not the ones SQLite runs inside a pragma function)."""
    return [sql for sql in trace if not sql.startswith("-- ")]


def _fsynced_commits(trace: list[str]) -> int:
    """Write transactions that ran at FULL (BEGIN IMMEDIATE not preceded by RELAX)."""
    return sum(
        1
        for i, sql in enumerate(trace)
        if sql == "BEGIN IMMEDIATE" and (i == 0 or trace[i - 1] != RELAX)
    )


@pytest.fixture
def full(tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "f.db"), synchronous="FULL") as saver:
        trace: list[str] = []
        saver.conn.set_trace_callback(trace.append)
        yield saver, trace


def test_lease_acquire_commits_without_fsync_and_full_is_restored(full) -> None:
    saver, trace = full
    assert saver._run(_one(_acquire()), True) is None
    assert _top(trace)[:3] == [LEVEL, RELAX, "BEGIN IMMEDIATE"]
    assert trace[-2:] == ["COMMIT", "PRAGMA synchronous = FULL"]
    saver.conn.set_trace_callback(None)
    assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == FULL
    assert saver._run(lo.read_flow("t")).holder == "me"


@pytest.mark.parametrize(("level", "number", "relaxed"), [("EXTRA", 3, True), ("NORMAL", 1, False)])
def test_the_level_set_on_the_connection_is_restored_exactly(full, level, number, relaxed) -> None:
    saver, trace = full
    saver.conn.execute(f"PRAGMA synchronous = {level}")  # the caller changed it after setup
    trace.clear()
    saver._run(_one(_acquire()), True)
    assert (RELAX in trace) is relaxed
    assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == number


def test_checkpoint_writes_commit_at_full(full) -> None:
    saver, trace = full
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert RELAX not in trace
    assert trace[0] == "BEGIN IMMEDIATE" and trace[-1] == "COMMIT"


def test_other_ops_in_a_relaxed_transaction_are_refused(full) -> None:
    saver, _ = full

    def mixed():
        yield _acquire()
        yield lo.CheckLease("t", "x", 60_000)

    with pytest.raises(StorageError, match="without fsync"):
        saver._run(mixed(), True)
    assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == FULL
    assert not saver.conn.in_transaction
    assert saver._run(lo.read_flow("t")) is None  # rolled back: no lease stored


def test_normal_connections_begin_writes_as_before(tmp_path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "n.db")) as saver:
        trace: list[str] = []
        saver.conn.set_trace_callback(trace.append)
        saver._run(_one(_acquire()), True)
    assert trace[0] == "BEGIN IMMEDIATE" and RELAX not in trace


def test_ten_node_chain_costs_one_fsynced_commit_per_step_plus_the_input(full) -> None:
    saver, trace = full
    graph = counting_chain(10).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "chain"}}
    assert graph.invoke({"count": 0}, config, durability="sync") == {"count": 10}
    # lease taken without fsync; START step + input in one commit; one per node;
    # the release rides in the last one
    assert trace.count(RELAX) == 1
    assert _fsynced_commits(trace) == 11
    # + the lease's (no fsync), which also read the thread's latest checkpoint
    assert trace.count("COMMIT") == 12
    first = trace[: trace.index("COMMIT") + 1]
    assert RELAX in first and any(s.startswith("INSERT OR REPLACE INTO tl_leases") for s in first)
    assert any(s.startswith("SELECT") and "v_checkpoints" in s for s in first)


async def test_async_saver_relaxes_the_lease_transaction(tmp_path) -> None:
    path = str(tmp_path / "a.db")
    async with AsyncSqliteSaver.from_conn_string(path, synchronous="FULL") as saver:
        trace: list[str] = []
        await saver.conn.set_trace_callback(trace.append)
        assert await saver._arun(_one(_acquire()), True) is None
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        await saver.conn.set_trace_callback(None)
        async with saver.conn.execute("PRAGMA synchronous") as cur:
            assert (await cur.fetchone())[0] == FULL
    assert _top(trace)[:3] == [LEVEL, RELAX, "BEGIN IMMEDIATE"]
    assert trace.count(RELAX) == 1
    assert _fsynced_commits(trace) == 1


def test_migrations_at_full_run_inside_their_transactions(tmp_path) -> None:
    import sqlite3

    conn = sqlite3.connect(str(tmp_path / "m.db"), isolation_level=None, check_same_thread=False)
    trace: list[str] = []
    conn.set_trace_callback(trace.append)
    saver = SqliteSaver(conn, synchronous="FULL")
    saver.setup()
    creates = [
        i for i, s in enumerate(trace) if s.startswith("CREATE TABLE IF NOT EXISTS tl_threads")
    ]
    begins = [i for i, sql in enumerate(trace) if sql == "BEGIN IMMEDIATE"]
    assert creates and begins and begins[0] < creates[0]  # not autocommitted one by one
    assert saver.executor.strict == "PRAGMA synchronous = FULL"
    conn.close()


@pytest.mark.parametrize("mode", ["DELETE", "TRUNCATE"])
def test_only_wal_mode_relaxes(full, mode) -> None:
    """The safety argument (sqlite/durability.py) needs WAL: a rollback-journal
    connection commits its lease at FULL."""
    saver, trace = full
    assert saver.conn.execute(f"PRAGMA journal_mode = {mode}").fetchone()[0] == mode.lower()
    trace.clear()
    saver._run(_one(_acquire()), True)
    assert RELAX not in trace and _fsynced_commits(trace) == 1
    assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == FULL
    assert saver._run(lo.read_flow("t")).holder == "me"


async def test_async_only_wal_mode_relaxes(tmp_path) -> None:
    path = str(tmp_path / "d.db")
    async with AsyncSqliteSaver.from_conn_string(path, synchronous="FULL") as saver:
        async with saver.conn.execute("PRAGMA journal_mode = DELETE") as cur:
            assert (await cur.fetchone())[0] == "delete"
        trace: list[str] = []
        await saver.conn.set_trace_callback(trace.append)
        await saver._arun(_one(_acquire()), True)
        await saver.conn.set_trace_callback(None)
    assert RELAX not in trace and _fsynced_commits(trace) == 1

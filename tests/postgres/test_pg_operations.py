"""Postgres operations: dropped connections, poolers, migrations under concurrency."""

from __future__ import annotations

import subprocess
import sys
import threading

import psycopg
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import uuid6
from threadloom.checkpoint.postgres import MIGRATIONS, PostgresSaver
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres


def put_one(saver: PostgresSaver, thread: str, i: int, parent: dict | None = None) -> dict:
    cp = empty_checkpoint()
    versions = {"n": str(i + 1)}
    cp["channel_values"] = {"n": i}
    cp["channel_versions"] = versions
    config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, cp, {"step": i}, versions)


def terminate(pg_url: str, app: str) -> int:
    """pg_terminate_backend every session named ``app``; wait until they are gone."""
    query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        pids = [r[0] for r in admin.execute(query, (app,))]
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    return len(pids)


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "single"])
def test_killed_connection_between_puts_reconnects(pg_url: str, pg_schema: str, pool: bool):
    app = f"tl-kill-{pool}-{pg_schema}"
    url = f"{pg_url}?application_name={app}"
    with PostgresSaver.from_conn_string(url, schema=pg_schema, pool=pool) as saver:
        saver.setup()
        first = put_one(saver, f"kill-{pool}", 0)
        assert terminate(pg_url, app) >= 1
        second = put_one(saver, f"kill-{pool}", 1, first)  # must reconnect, not fail
        history = [t.config for t in saver.list({"configurable": {"thread_id": f"kill-{pool}"}})]
        assert history == [second, first]  # nothing committed was lost


def test_killed_caller_connection_gives_storage_error(pg_url: str, pg_schema: str) -> None:
    app = f"tl-kill-caller-{pg_schema}"
    conn = psycopg.connect(f"{pg_url}?application_name={app}", autocommit=True)
    saver = PostgresSaver(conn, schema=pg_schema)
    saver.setup()
    put_one(saver, "kill-caller", 0)
    terminate(pg_url, app)
    with pytest.raises(StorageError, match="127.0.0.1:5432|localhost"):
        put_one(saver, "kill-caller", 1)
    conn.close()


def test_unreachable_server_names_host_and_port() -> None:
    with pytest.raises(StorageError, match=r"127\.0\.0\.1:1/"):
        with PostgresSaver.from_conn_string("postgresql://postgres@127.0.0.1:1/test"):
            pass
    with pytest.raises(StorageError, match=r"127\.0\.0\.1:1/"):
        pool = {"timeout": 0.5, "reconnect_timeout": 0.5}
        with PostgresSaver.from_conn_string("postgresql://postgres@127.0.0.1:1/x", pool=pool):
            pass


def test_statements_are_never_prepared_by_default(pg_url: str, pg_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = None
        for i in range(8):  # well past psycopg's default threshold of 5
            parent = put_one(saver, "prep", i, parent)
            saver.get_tuple({"configurable": {"thread_id": "prep"}})
        conn = saver.connector.conn
        assert conn.prepare_threshold is None
        count = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
        assert count == 0
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema, prepare_threshold=0) as saver:
        saver.get_tuple({"configurable": {"thread_id": "prep"}})
        conn = saver.connector.conn
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] > 0


def _migrated_versions(pg_url: str, schema: str) -> list[int]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(f'SELECT v FROM "{schema}".checkpoint_migrations ORDER BY v')
        return [r[0] for r in rows]


def test_setup_from_many_threads_at_once(pg_url: str, fresh_schema: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def run() -> None:
        try:
            with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
                barrier.wait()
                saver.setup()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _migrated_versions(pg_url, fresh_schema) == list(range(len(MIGRATIONS)))


def test_setup_from_many_processes_at_once(pg_url: str, fresh_schema: str) -> None:
    code = (
        "import sys; from threadloom.checkpoint.postgres import PostgresSaver\n"
        "with PostgresSaver.from_conn_string(sys.argv[1], schema=sys.argv[2]) as s: s.setup()\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_url, fresh_schema]) for _ in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    assert _migrated_versions(pg_url, fresh_schema) == list(range(len(MIGRATIONS)))


def test_setup_inside_a_caller_transaction(pg_url: str, fresh_schema: str) -> None:
    with psycopg.connect(pg_url) as conn:
        with conn.transaction(force_rollback=True):
            saver = PostgresSaver(conn, schema=fresh_schema)
            saver.setup()
            put_one(saver, "tx", 0)
            assert saver.get_tuple({"configurable": {"thread_id": "tx"}}) is not None
        exists = conn.execute("SELECT to_regclass(%s)", (f'"{fresh_schema}".checkpoints',))
        assert exists.fetchone()[0] is None  # rolled back with the caller's transaction
        with conn.transaction():
            PostgresSaver(conn, schema=fresh_schema).setup()
    assert _migrated_versions(pg_url, fresh_schema) == list(range(len(MIGRATIONS)))


def test_schema_newer_than_code_is_refused(pg_url: str, fresh_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        saver.setup()
        saver.connector.conn.execute(
            f'INSERT INTO "{fresh_schema}".checkpoint_migrations VALUES (%s)', (len(MIGRATIONS),)
        )
        with pytest.raises(StorageError, match="upgrade threadloom"):
            saver.setup()


def test_latest_checkpoint_uses_the_primary_key_index(pg_url: str, pg_schema: str) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        conn = saver.connector.conn
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            f'EXPLAIN SELECT checkpoint_id FROM "{pg_schema}".checkpoints'
            " WHERE thread_id = 'x' AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchall()
        text = "\n".join(r[0] for r in plan)
        assert "Index" in text and "Backward" in text and "Sort" not in text


def test_langgraph_tables_in_the_schema_are_detected(pg_url: str, fresh_schema: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver as LangGraphSaver

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{fresh_schema}"')
    with psycopg.connect(pg_url, autocommit=True, options=f"-c search_path={fresh_schema}") as conn:
        LangGraphSaver(conn).setup()
    with PostgresSaver.from_conn_string(pg_url, schema=fresh_schema) as saver:
        with pytest.raises(StorageError, match="LangGraph"):
            saver.setup()
        with pytest.raises(StorageError, match="not threadloom's"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "single"])
def test_connection_killed_inside_a_flow_is_replayed(pg_url, pg_schema, pool) -> None:
    """put_writes reads the task's row, then writes: kill the backend in between."""
    app = f"tl-mid-{pool}-{pg_schema}"
    with PostgresSaver.from_conn_string(
        f"{pg_url}?application_name={app}", schema=pg_schema, pool=pool
    ) as saver:
        saver.setup()
        config = put_one(saver, f"mid-{pool}", 0)
        # the pessimistic path (read, then write); an optimistic put_writes has one
        # round trip, so a kill after its statements is a loss while committing
        saver.executor.optimistic_transaction = None
        send, calls = saver.connector._send, []

        def send_then_kill(conn, batch):
            result = send(conn, batch)
            calls.append(len(batch))
            if len(calls) == 1:
                terminate(pg_url, app)
            return result

        saver.connector._send = send_then_kill
        saver.put_writes(config, [("n", "late")], "task-1")
        saver.connector._send = send
        assert len(calls) >= 3  # read, (dead) write, replayed read + write
        tup = saver.get_tuple({"configurable": {"thread_id": f"mid-{pool}"}})
        assert tup.pending_writes == [("task-1", "n", "late")]


async def test_async_saver_reconnects_after_kill(pg_url: str, pg_schema: str) -> None:
    from threadloom.checkpoint.postgres import AsyncPostgresSaver

    app = f"tl-akill-{pg_schema}"
    url = f"{pg_url}?application_name={app}"
    async with AsyncPostgresSaver.from_conn_string(url, schema=pg_schema) as saver:
        await saver.setup()
        cp = empty_checkpoint()
        cp["channel_values"], cp["channel_versions"] = {"n": 1}, {"n": "1"}
        first = await saver.aput(
            {"configurable": {"thread_id": "akill", "checkpoint_ns": ""}}, cp, {}, {"n": "1"}
        )
        assert terminate(pg_url, app) == 1
        later = cp | {"id": str(uuid6(clock_seq=1))}
        second = await saver.aput(first, later, {}, {"n": "1"})
        ids = [t.config async for t in saver.alist({"configurable": {"thread_id": "akill"}})]
        assert ids == [second, first]


def test_concurrent_writers_sharing_blobs_keep_exact_refcounts(pg_url, pg_schema) -> None:
    """Threads storing the same large values contend for the same blob rows."""
    shared = [f"shared message {k} " * 20 for k in range(20)]
    errors: list[str] = []
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema, pool={"max_size": 8}) as s:
        s.setup()

        def work(thread_id: str) -> None:
            try:
                parent = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
                for i in range(10):
                    cp = empty_checkpoint()
                    versions = {"messages": str(i + 1), "doc": str(i + 1)}
                    cp["channel_values"] = {"messages": shared[: i + 1], "doc": "D" * 400}
                    cp["channel_versions"] = versions
                    parent = s.put(parent, cp, {"step": i}, versions)
                    s.put_writes(parent, [("doc", "W" * 300)], "task")
                if thread_id.endswith("0"):
                    s.delete_thread(thread_id)
            except Exception as exc:  # collected and asserted below
                errors.append(repr(exc))

        workers = [threading.Thread(target=work, args=(f"conc-{k}",)) for k in range(10)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert errors == []
    q = f'"{pg_schema}"'
    with psycopg.connect(pg_url) as conn:
        wrong = conn.execute(
            f"""WITH held AS (
                SELECT substring(h FROM i * 16 + 1 FOR 16) AS hash FROM (
                    SELECT hashes AS h FROM {q}.checkpoint_refs
                    UNION ALL SELECT hashes FROM {q}.checkpoint_writes
                    UNION ALL SELECT children FROM {q}.checkpoint_blobs
                ) x CROSS JOIN LATERAL generate_series(0, length(h) / 16 - 1) i)
            SELECT count(*) FROM {q}.checkpoint_blobs b
            LEFT JOIN {q}.checkpoint_blob_refs r ON r.id = b.id
            LEFT JOIN (SELECT hash, count(*) AS n FROM held GROUP BY hash) c USING (hash)
            WHERE coalesce(r.refs, -1) <> coalesce(c.n, 0)"""
        ).fetchone()[0]
    assert wrong == 0


def test_writers_of_one_thread_take_its_advisory_lock(pg_url, pg_schema) -> None:
    """A prune/fork/put of a thread waits for another writer of the same thread."""
    from threadloom.checkpoint.postgres.executor import thread_lock_key

    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        key = thread_lock_key(saver.sql, "locked")
        with psycopg.connect(pg_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (key,))
            done = threading.Event()
            worker = threading.Thread(target=lambda: (put_one(saver, "locked", 0), done.set()))
            worker.start()
            waiting = (
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND classid = %s::oid AND objid = %s::oid AND objsubid = 1"
            )
            ids = ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)
            for _ in range(500):  # until the put is queued behind our lock
                if holder.execute(waiting, ids).fetchone()[0]:
                    break
                threading.Event().wait(0.01)
            assert holder.execute(waiting, ids).fetchone()[0] == 1 and not done.is_set()
            holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
            worker.join(timeout=30)
        assert done.is_set()

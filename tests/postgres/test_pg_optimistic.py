"""Optimistic put / put_writes / put_step on Postgres (postgres/optimistic.py).

Each rare case the optimistic transaction guesses away (a task row that exists,
a pruned diff base, a ref row that exists, another writer's row, a lease lost
or asked to stop) must make the database refuse the transaction, and the
pessimistic re-run must store exactly what a saver that never guesses stores:
every table is compared row by row with a second schema written pessimistically.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver, seenrows
from threadloom.checkpoint.postgres.idpack import pack_ordered
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.storage import drive
from threadloom.errors import StorageError

pytestmark = pytest.mark.postgres

BIG = "v" * 700  # stored as a blob, not inline


def _schema(pg_url: str) -> Iterator[str]:
    name = f"tl_opt_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def pair(pg_url: str) -> Iterator[tuple[PostgresSaver, PostgresSaver, str]]:
    """(optimistic saver, pessimistic saver, url): same calls, separate schemas."""
    schemas = [_schema(pg_url), _schema(pg_url)]
    names = [next(s) for s in schemas]
    with (
        PostgresSaver.from_conn_string(pg_url, schema=names[0]) as fast,
        PostgresSaver.from_conn_string(pg_url, schema=names[1]) as slow,
    ):
        fast.setup()
        slow.setup()
        slow.executor.optimistic_transaction = None  # the driver then never guesses
        yield fast, slow, pg_url
    for s in schemas:
        next(s, None)


def dump(url: str, saver: PostgresSaver) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the saver's schema, sorted."""
    sql = SQL(saver.sql.schema)
    out = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for table, select in (
            (sql.ckpt, f"SELECT * FROM {sql.ckpt}"),
            (sql.refs, f"SELECT * FROM {sql.refs}"),
            # blob ids differ between schemas (a skipped insert burns one): rows
            # without them, counts by hash (None: a count row with no blob)
            (sql.blobs, f"SELECT hash, tag, data, children FROM {sql.blobs}"),
            (
                sql.counts,
                f"SELECT b.hash, c.refs FROM {sql.counts} c LEFT JOIN {sql.blobs} b USING (id)",
            ),
            (sql.writes, f"SELECT * FROM {sql.writes}"),
        ):
            rows = conn.execute(select).fetchall()
            out[table.split(".")[1]] = sorted(
                (tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows),
                key=repr,
            )
    return out


def held(tables: dict[str, list[tuple[Any, ...]]]) -> dict[bytes, int]:
    """Every blob's true reference count: occurrences of its hash in ref rows,
    write rows and other blobs' children (what ``checkpoint_blob_refs`` must say)."""
    counts: dict[bytes, int] = {}
    packed = [r[7] for r in tables["checkpoint_refs"]]  # hashes
    packed += [r[-1] for r in tables["checkpoint_writes"]]
    packed += [r[3] for r in tables["checkpoint_blobs"]]  # children
    for hashes in packed:
        for i in range(0, len(hashes), 16):
            counts[hashes[i : i + 16]] = counts.get(hashes[i : i + 16], 0) + 1
    return counts


def consistent(url: str, saver: PostgresSaver) -> None:
    tables = dump(url, saver)
    assert dict(tables["checkpoint_blob_refs"]) == held(tables)
    assert {r[0] for r in tables["checkpoint_blobs"]} == set(held(tables))


def both(pair: Any, fn: Any) -> None:
    fast, slow, url = pair
    fn(fast)
    fn(slow)
    assert dump(url, fast) == dump(url, slow)
    consistent(url, fast)


def cp(i: int, value: Any, version: str | None = None) -> dict[str, Any]:
    c = empty_checkpoint()
    c["id"] = f"1ef00000-0000-6000-8000-{i:012d}"
    c["ts"] = "2026-11-22T00:00:00+00:00"
    c["channel_values"] = {"doc": value}
    c["channel_versions"] = {"doc": version or f"{i:032}.{i:016}"}
    return c


def config(thread: str, cid: str | None = None) -> dict[str, Any]:
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def put(saver: PostgresSaver, parent: Any, c: dict[str, Any]) -> Any:
    return saver.put(parent, c, {"step": 1}, dict(c["channel_versions"]))


def test_the_common_case_is_never_refused(pair, refusals) -> None:
    def run(saver: PostgresSaver) -> None:
        parent = config("t")
        for i in range(4):
            c = cp(i, BIG + str(i))
            writes = [(parent, [("doc", BIG + "w"), ("x", i)], f"task{i}", "")]
            parent = saver.put_step(writes if i else [], (parent, c, {"step": i}, {"doc": 1}))
        saver.put_writes(parent, [("doc", [1, 2])], "last")

    both(pair, run)
    assert refusals == []


def test_a_second_put_writes_of_a_task_merges_into_its_row(pair, refusals) -> None:
    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, "a"))
        saver.put_writes(parent, [("doc", BIG + "1"), ("x", 1)], "task")
        saver.put_writes(parent, [("doc", BIG + "2"), ("y", 2)], "task")  # the row exists

    both(pair, run)
    assert refusals == []  # the saver knows the row it wrote (seenrows.known): no refusal
    fast = pair[0]
    writes = fast.get_tuple(config("t")).pending_writes
    assert [(w[1], w[2]) for w in writes] == [("doc", BIG + "1"), ("x", 1)]  # first wins


def test_another_writers_row_refuses_the_insert(pair, refusals) -> None:
    """Two savers (processes) write the same task: the second merges."""

    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, "a"))
        other = PostgresSaver(saver.connector.conn, schema=saver.sql.schema)
        other.put_writes(parent, [("doc", BIG)], "task")
        saver.put_step([(parent, [("x", 1)], "task", "")], None)

    both(pair, run)
    assert refusals == [frozenset({"t"})]


def test_a_pruned_diff_base_refuses_the_put(pair, refusals) -> None:
    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, BIG))
        mid = put(saver, parent, cp(2, BIG + "2"))  # a diff against 1, cached
        with psycopg.connect(pair[2], autocommit=True) as conn:  # "another process" prunes
            conn.execute(
                f"DELETE FROM {saver.sql.ckpt} WHERE checkpoint_id = %s",
                (pack_ordered(mid["configurable"]["checkpoint_id"]),),
            )
        put(saver, mid, cp(3, BIG + "3"))

    both(pair, run)
    assert refusals == [frozenset({"t"})]
    latest = pair[0].get_tuple(config("t"))
    assert latest.checkpoint["channel_values"] == {"doc": BIG + "3"}


def test_an_existing_ref_refuses_the_put(pair, refusals) -> None:
    """The same checkpoint put again: its ref rows exist (first one wins)."""

    def run(saver: PostgresSaver) -> None:
        parent = put(saver, config("t"), cp(1, BIG))
        again = PostgresSaver(saver.connector.conn, schema=saver.sql.schema)
        put(again, config("t"), cp(2, BIG + "x", version="7"))
        put(saver, parent, cp(2, BIG + "y", version="7"))  # ref (doc, 7) exists

    both(pair, run)
    assert refusals == [frozenset({"t"})]


def test_a_new_manifest_counts_its_segments_only_when_new(pair, refusals) -> None:
    """Lists become chunks under a manifest; the insert counts a manifest's
    segments itself, and a manifest that exists already (another thread wrote
    the same list) adds nothing."""

    def run(saver: PostgresSaver) -> None:
        for thread in ("a", "b"):
            parent = config(thread)
            items: list[str] = []
            for i in range(1, 40):
                items = [*items, f"message {i} " + "m" * 60]
                parent = put(saver, parent, cp(i, list(items)))

    both(pair, run)
    assert refusals == []
    tables = dump(pair[2], pair[0])
    assert any(children for *_, children in tables["checkpoint_blobs"])  # manifests
    assert all(refs > 0 for _, refs in tables["checkpoint_blob_refs"])


def fence(thread: str, token: str) -> Any:
    """A write flow that only checks the lease (what a leased put starts with)."""
    return (yield lo.CheckLease(thread, token, 60_000))


def take(thread: str, token: str) -> Any:
    return (yield lo.AcquireLease(thread, "me", token, 60_000))


def stop(thread: str) -> Any:
    return (yield lo.RequestStop(thread, "interrupt"))


def test_the_fence_is_guessed_and_checked(pair, refusals) -> None:
    saver = pair[0]
    run = saver._run
    assert run(take("lt", "tok"), True) is None
    assert run(fence("lt", "tok"), True) == ""
    assert refusals == []
    assert run(fence("lt", "other"), True) is None  # not ours: lost
    assert refusals == [frozenset({"lt"})]
    run(stop("lt"), True)
    assert run(fence("lt", "tok"), True) == "interrupt"
    assert len(refusals) == 2


async def test_async_saver_guesses_and_recovers_alike(pg_url: str, refusals) -> None:
    schemas = [_schema(pg_url), _schema(pg_url)]
    names = [next(s) for s in schemas]
    try:
        async with (
            AsyncPostgresSaver.from_conn_string(pg_url, schema=names[0]) as fast,
            AsyncPostgresSaver.from_conn_string(pg_url, schema=names[1]) as slow,
        ):
            await fast.setup()
            await slow.setup()
            slow.executor.aoptimistic_transaction = None
            for saver in (fast, slow):
                parent = await saver.aput(config("t"), cp(1, BIG), {}, {"doc": 1})
                await saver.aput_writes(parent, [("doc", BIG + "w")], "task")
                seenrows.forget(saver.sql)  # as if another process had written it
                step = [(parent, [("x", 1)], "task", "")]  # the task's row exists
                await saver.aput_step(step, (parent, cp(2, BIG + "2"), {}, {"doc": 1}))
        assert refusals == [frozenset({"t"})]
        fast_rows = dump(pg_url, _Named(names[0]))
        assert fast_rows == dump(pg_url, _Named(names[1]))
    finally:
        for s in schemas:
            next(s, None)


class _Named:
    """Just enough of a saver for :func:`dump`."""

    def __init__(self, schema: str) -> None:
        self.sql = SQL(schema)


def test_a_connection_lost_after_the_commit_left_is_reported(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One write: the statements and the Sync leave together (:mod:`.lean`), so
    a connection lost once they left, with no reply read, may or may not have
    committed: a loss while committing (reported, never guessed or replayed);
    the next call works on a new connection."""
    import socket

    from threadloom.checkpoint.postgres import lean

    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = put(saver, config("kill"), cp(1, "a"))
        send = lean.send

        def send_then_cut(pgconn: Any) -> Any:
            yield from send(pgconn)
            sock = socket.socket(fileno=pgconn.socket)
            try:
                sock.shutdown(socket.SHUT_RDWR)  # replies never read
            finally:
                sock.detach()

        monkeypatch.setattr(lean, "send", send_then_cut)
        with pytest.raises(StorageError, match="while committing"):
            saver.put_writes(parent, [("n", "late")], "task")
        monkeypatch.undo()
        late = saver.get_tuple(parent).pending_writes
        assert late in ([], [("task", "n", "late")])
        saver.put_writes(parent, [("n", "again")], "task-2")
        assert saver.get_tuple(parent).pending_writes == [*late, ("task-2", "n", "again")]


def test_one_shot_iterators_are_never_guessed() -> None:
    """A refused run starts again from the flow's arguments: an argument that is
    (or holds) a one-shot iterator would be exhausted by then, so such a flow
    is never run optimistically; a wrapper's inner flow is rebuilt too."""

    def flow(items: Any, n: int) -> Any:
        got = yield list(items)
        return got, n

    def wrapper(inner: Any) -> Any:
        return (yield from inner)

    assert drive._restarter(flow(iter([1]), 1)) is None
    assert drive._restarter(flow([(iter([1]), 2)], 1)) is None
    assert drive._restarter(wrapper(flow(iter([1]), 1))) is None
    started = flow([1], 1)
    next(started)
    assert drive._restarter(started) is None
    restart = drive._restarter(wrapper(flow([(1, 2)], 3)))
    assert restart is not None
    for _ in range(2):  # each rebuild runs from the start
        again = restart()
        assert next(again) == [(1, 2)]
        with pytest.raises(StopIteration) as stop:
            again.send("answer")
        assert stop.value.value == ("answer", 3)


def test_concurrent_writers_of_one_task_both_land(pg_url: str, pg_schema: str, refusals) -> None:
    """Two processes write the same tasks at the same moment: the thread lock
    orders them, the second one's insert is refused and it merges (as LangGraph
    does: its write has the same index, so it is dropped, and so is its blob)."""
    import threading

    with (
        PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as one,
        PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as two,
    ):
        one.setup()
        parent = put(one, config("race"), cp(1, "a"))
        for round_ in range(5):
            gate = threading.Barrier(2)

            def write(
                saver: PostgresSaver, channel: str, round_: int = round_, gate: Any = gate
            ) -> None:
                gate.wait()
                saver.put_writes(parent, [(channel, BIG + channel)], f"task{round_}")

            workers = [
                threading.Thread(target=write, args=(one, "x")),
                threading.Thread(target=write, args=(two, "y")),
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        writes = one.get_tuple(parent).pending_writes
        for round_ in range(5):
            mine = [w[1] for w in writes if w[0] == f"task{round_}"]
            assert mine in (["x"], ["y"])  # the same write index: the first one wins
        assert len(refusals) == 5  # exactly the second writer of each task
        consistent(pg_url, one)


def test_a_flow_run_from_a_flow_is_restarted_with_the_outermost(pg_url, pg_schema, refusals):
    """A refusal inside a joined (nested) run restarts the outer flow, whose
    transaction it was; the nested run never restarts on its own."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = put(saver, config("nest"), cp(1, "a"))
        saver.put_writes(parent, [("a", 1)], "task")
        seenrows.forget(saver.sql)  # its next guess is "no row" again: refused
        runs: list[str] = []

        def outer() -> Any:
            runs.append("outer")
            yield from ()
            saver.put_writes(parent, [("b", 2)], "task")  # joins; refused at commit
            return "done"

        assert saver._run(outer_flow(outer), True) == "done"
        assert runs == ["outer", "outer"] and len(refusals) == 1
        assert saver.get_tuple(parent).pending_writes == [("task", "a", 1)]


def outer_flow(body: Any) -> Any:
    return (yield from body())

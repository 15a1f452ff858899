"""A resume's writes on Postgres: no optimistic refusal, no psycopg warning.

A resumed task already has a row of pending writes (its interrupt). The
optimistic ``put_writes`` used to guess "no row" for every task, so the store
refused each resume's transaction once (twice for an interrupt inside a
subgraph) and the flow ran again pessimistically; psycopg also logged "error
ignored terminating <Pipeline>" for the subgraph case. The saver now guesses
the rows it wrote or read (postgres/seenrows.py ``known``) and replaces a known
row only where it is still what it guessed (postgres/optimistic.py).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest

from tests.postgres.test_pg_optimistic import BIG, config, cp, put
from tests.postgres.test_pg_round_trips import relay_url
from threadloom.checkpoint.postgres import AsyncPostgresSaver, PostgresSaver, seenrows
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.storage.ops import WriteRow
from threadloom.graph import START, StateGraph
from threadloom.types import Command, interrupt

pytestmark = pytest.mark.postgres

# the resume of one interrupted node: the lease acquire with its read of the
# checkpoint (4) and the run's one fenced write (1); it was 14: that write was
# refused (its task had a row: the interrupt) and re-run pessimistically (10)
RESUME_TRIPS = 5


class State(TypedDict):
    log: Annotated[list, operator.add]


def _ask(state: State) -> dict[str, Any]:
    return {"log": [interrupt("q")]}


def _graph(kind: str) -> StateGraph:
    if kind == "plain":
        return (
            StateGraph(State)
            .add_node("ask", _ask)
            .add_node("z", lambda s: {"log": ["z"]})
            .add_edge(START, "ask")
            .add_edge("ask", "z")
        )
    sub = StateGraph(State).add_node("ask", _ask).add_edge(START, "ask").compile()
    return StateGraph(State).add_node("sub", sub).add_edge(START, "sub")


WANT = {"plain": ["r", "z"], "subgraph": ["r"]}


@pytest.fixture
def psycopg_warnings(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        yield caplog


def _warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    """psycopg's records of the test's call phase (``caplog.records`` is per phase)."""
    return [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")]


@pytest.mark.parametrize("kind", ["plain", "subgraph"])
def test_a_resume_is_not_refused(pg_url, pg_schema, refusals, psycopg_warnings, kind) -> None:
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        app = _graph(kind).compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": f"resume-{kind}"}}
        first = app.invoke({"log": []}, cfg)
        assert [i.value for i in first["__interrupt__"]] == ["q"]
        assert app.invoke(Command(resume="r"), cfg) == {"log": WANT[kind]}
    assert refusals == []
    assert _warned(psycopg_warnings) == []


@pytest.mark.parametrize("kind", ["plain", "subgraph"])
async def test_an_async_resume_is_not_refused(
    pg_url, pg_schema, refusals, psycopg_warnings, kind
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        await saver.setup()
        app = _graph(kind).compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": f"aresume-{kind}"}}
        first = await app.ainvoke({"log": []}, cfg)
        assert [i.value for i in first["__interrupt__"]] == ["q"]
        assert await app.ainvoke(Command(resume="r"), cfg) == {"log": WANT[kind]}
    assert refusals == []
    assert _warned(psycopg_warnings) == []


@pytest.mark.parametrize("kind", ["plain", "subgraph"])
def test_a_resume_by_another_saver_is_not_refused(pg_url, pg_schema, refusals, kind) -> None:
    """Another process resumes (a fresh saver: it never wrote nor read the row):
    the lease acquire's read of the checkpoint teaches it the interrupted task's row."""
    cfg = {"configurable": {"thread_id": f"elsewhere-{kind}"}}
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        _graph(kind).compile(checkpointer=saver).invoke({"log": []}, cfg)
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as other:
        app = _graph(kind).compile(checkpointer=other)
        assert app.invoke(Command(resume="r"), cfg) == {"log": WANT[kind]}
    assert refusals == []


def test_a_resume_costs_its_round_trips(pg_url, pg_schema, refusals) -> None:
    url, relay = relay_url(pg_url)
    try:
        with PostgresSaver.from_conn_string(url, schema=pg_schema) as saver:
            saver.setup()
            app = _graph("plain").compile(checkpointer=saver)
            cfg = {"configurable": {"thread_id": "resume-trips"}}
            app.invoke({"log": []}, cfg)
            trips, out = relay.count(app.invoke, Command(resume="r"), cfg)
        assert out == {"log": ["r", "z"]} and refusals == []
        assert trips == RESUME_TRIPS
    finally:
        relay.listener.close()


def test_a_second_put_writes_of_a_task_costs_one_round_trip(pg_url, pg_schema, refusals) -> None:
    url, relay = relay_url(pg_url)
    try:
        with PostgresSaver.from_conn_string(url, schema=pg_schema) as saver:
            saver.setup()
            parent = put(saver, config("second"), cp(1, "a"))
            first, _ = relay.count(saver.put_writes, parent, [("x", 1)], "task")
            second, _ = relay.count(saver.put_writes, parent, [("x", 9), ("y", 2)], "task")
            same, _ = relay.count(saver.put_writes, parent, [("x", 7)], "task")  # no change
            writes = saver.get_tuple(parent).pending_writes
        assert (first, second, same) == (1, 1, 1) and refusals == []
        assert writes == [("task", "x", 1), ("task", "y", 2)]  # the first write of an index wins
    finally:
        relay.listener.close()


def test_a_stale_guess_is_refused_and_merged_again(pg_url, pg_schema, refusals) -> None:
    """Another saver (process) changed the row this one remembers: the update
    (and, when nothing changes, the check at commit) refuses; the pessimistic
    re-run merges into the row as it is. A stale guess costs what the old
    "no row" guess cost: one refusal."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        other = PostgresSaver(saver.connector.conn, schema=pg_schema)
        parent = put(saver, config("stale"), cp(1, "a"))
        saver.put_writes(parent, [("x", 1)], "task")
        other.get_tuple(parent)  # other learns the row by reading it: no refusal
        other.put_writes(parent, [("x", 1), ("y", 2)], "task")
        assert refusals == []
        saver.put_writes(parent, [("x", 1), ("y", 5), ("z", 3)], "task")  # guesses [x]
        assert refusals == [frozenset({"stale"})]
        other.get_tuple(parent)
        other.put_writes(parent, [("x", 1), ("y", 2), ("z", 3), ("w", BIG)], "task")
        saver.put_writes(parent, [("x", 1)], "task")  # no change: checked at commit
        assert len(refusals) == 2
        writes = saver.get_tuple(parent).pending_writes
    assert writes == [("task", "x", 1), ("task", "y", 2), ("task", "z", 3), ("task", "w", BIG)]


def test_a_forgotten_row_is_learned_from_a_read(pg_url, pg_schema, refusals) -> None:
    """A saver that did not write the row but read the checkpoint guesses it."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        parent = put(saver, config("read"), cp(1, "a"))
        saver.put_writes(parent, [("x", 1)], "task")
        seenrows.forget(saver.sql)
        assert saver.get_tuple(parent).pending_writes == [("task", "x", 1)]
        saver.put_writes(parent, [("x", 1), ("y", 2)], "task")
        assert refusals == []
        seenrows.forget(saver.sql)
        saver.put_writes(parent, [("x", 1), ("y", 2), ("z", 3)], "task")  # guesses "no row"
        assert refusals == [frozenset({"read"})]
        writes = saver.get_tuple(parent).pending_writes
    assert writes == [("task", "x", 1), ("task", "y", 2), ("task", "z", 3)]


def test_a_refusal_inside_a_pipeline_logs_no_warning(
    pg_url, pg_schema, refusals, psycopg_warnings
) -> None:
    """A stale guess refused by a statement whose answer was awaited (a blob
    insert's): the transaction had entered psycopg's pipeline, whose exit logged
    "error ignored terminating <psycopg.Pipeline>: pipeline aborted"."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        other = PostgresSaver(saver.connector.conn, schema=pg_schema)
        parent = put(saver, config("warn"), cp(1, "a"))
        saver.put_writes(parent, [("x", BIG)], "task")
        other.get_tuple(parent)
        other.put_writes(parent, [("x", 1), ("y", 2)], "task")
        saver.put_writes(parent, [("x", 1), ("y", 2), ("z", BIG + "z")], "task")
        writes = saver.get_tuple(parent).pending_writes
    assert refusals == [frozenset({"warn"})]
    assert [w[1] for w in writes] == ["x", "y", "z"] and writes[2][2] == BIG + "z"
    assert _warned(psycopg_warnings) == []


async def test_an_async_refusal_inside_a_pipeline_logs_no_warning(
    pg_url, pg_schema, refusals, psycopg_warnings
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        await saver.setup()
        other = AsyncPostgresSaver(saver.connector.conn, schema=pg_schema)
        parent = await saver.aput(config("awarn"), cp(1, "a"), {}, {"doc": 1})
        await saver.aput_writes(parent, [("x", BIG)], "task")
        await other.aget_tuple(parent)
        await other.aput_writes(parent, [("x", 1), ("y", 2)], "task")
        await saver.aput_writes(parent, [("x", 1), ("y", 2), ("z", BIG + "z")], "task")
        writes = (await saver.aget_tuple(parent)).pending_writes
    assert refusals == [frozenset({"awarn"})]
    assert [w[1] for w in writes] == ["x", "y", "z"] and writes[2][2] == BIG + "z"
    assert _warned(psycopg_warnings) == []


def test_after_a_refusal_the_rerun_s_write_is_guessed(pg_url, pg_schema, refusals) -> None:
    """The pessimistic re-run after a refusal remembers the row it WROTE, not
    the one it read before writing: the task's next ``put_writes`` by the same
    saver is not refused again (it was, at every later write of the task)."""
    with PostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        saver.setup()
        other = PostgresSaver(saver.connector.conn, schema=pg_schema)
        parent = put(saver, config("rerun"), cp(1, "a"))
        saver.put_writes(parent, [("x", 1)], "task")
        other.get_tuple(parent)
        other.put_writes(parent, [("x", 1), ("y", 2)], "task")
        xyz = [("x", 1), ("y", 2), ("z", 3)]  # a write's index is its position
        saver.put_writes(parent, xyz, "task")  # stale guess: refused, merged again
        assert refusals == [frozenset({"rerun"})]
        saver.put_writes(parent, [*xyz, ("w", 4)], "task")
        saver.put_writes(parent, [*xyz, ("w", 4), ("v", BIG)], "task")
        saver.put_writes(parent, [("x", 9)], "task")  # no change: checked at commit
        writes = saver.get_tuple(parent).pending_writes
    assert refusals == [frozenset({"rerun"})]
    assert [w[1:] for w in writes] == [("x", 1), ("y", 2), ("z", 3), ("w", 4), ("v", BIG)]


async def test_after_an_async_refusal_the_rerun_s_write_is_guessed(
    pg_url, pg_schema, refusals
) -> None:
    async with AsyncPostgresSaver.from_conn_string(pg_url, schema=pg_schema) as saver:
        await saver.setup()
        other = AsyncPostgresSaver(saver.connector.conn, schema=pg_schema)
        parent = await saver.aput(config("arerun"), cp(1, "a"), {}, {"doc": 1})
        await saver.aput_writes(parent, [("x", 1)], "task")
        await other.aget_tuple(parent)
        await other.aput_writes(parent, [("x", 1), ("y", 2)], "task")
        await saver.aput_writes(parent, [("x", 1), ("y", 2), ("z", 3)], "task")
        await saver.aput_writes(parent, [("x", 1), ("y", 2), ("z", 3), ("w", 4)], "task")
        writes = (await saver.aget_tuple(parent)).pending_writes
    assert refusals == [frozenset({"arerun"})]
    assert [w[1:] for w in writes] == [("x", 1), ("y", 2), ("z", 3), ("w", 4)]


def _row(checkpoint: str, task: str) -> WriteRow:
    return WriteRow("t", "", checkpoint, task, "", b"\x90", b"")


def _held(sql: SQL, checkpoints: int) -> list[int]:
    return [len(seenrows.known(sql, "t", "", f"c{i}")) for i in range(checkpoints)]


def test_the_known_rows_are_bounded_by_rows() -> None:
    """A wide fan-out (1,000 task rows per checkpoint) keeps at most
    KNOWN_ROWS rows per saver, the newest; the bound counted checkpoints
    (1,024 of them, each with every task row: ~340 MB for such a fan-out)."""
    sql = SQL("bounded")
    for c in range(12):
        for k in range(1000):
            seenrows.remember(sql, [_row(f"c{c}", f"task{k}")])
    held = _held(sql, 12)
    assert sum(held) == seenrows.known_rows(sql) <= seenrows.KNOWN_ROWS
    assert held[11] == 1000 and held[0] == 0  # the newest checkpoint whole, the oldest gone
    assert seenrows.known(sql, "t", "", "c11")[-1].task_id == "task999"
    seenrows.forget(sql)
    assert seenrows.known(sql, "t", "", "c11") == [] and seenrows.known_rows(sql) == 0


def test_one_checkpoint_wider_than_the_bound_keeps_its_newest_rows() -> None:
    """A single checkpoint (a fan-out wider than the bound, written or read
    whole) keeps only its newest rows."""
    sql = SQL("wide")
    n = seenrows.KNOWN_ROWS * 2 + 7
    seenrows.remember(sql, [_row("c0", f"task{k}") for k in range(n)])
    tasks = [w.task_id for w in seenrows.known(sql, "t", "", "c0")]
    assert 0 < len(tasks) == seenrows.known_rows(sql) <= seenrows.KNOWN_ROWS
    assert tasks[-1] == f"task{n - 1}" and "task0" not in tasks
    seenrows.forget(sql)

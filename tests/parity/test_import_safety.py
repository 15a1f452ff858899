"""import_langgraph: what a failed or repeated import may touch (review findings,
session 10, second round).

A refused value used to be found only while the thread was being written, and
the undo then deleted the whole thread, including what a live program had
written to it meanwhile; a re-run counted pending writes as "already there" by
task and channel, not by value; LangGraph's Postgres savers were listed whole
(their client cursor buffers every row)."""

from __future__ import annotations

import operator
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver as LGMemorySaver
from langgraph.graph import START as LG_START
from langgraph.graph import StateGraph as LGStateGraph
from langgraph.types import Command as LGCommand
from langgraph.types import interrupt as lg_interrupt
from typing_extensions import TypedDict

from tests.parity.test_import_whole import Receipt, _count, _FailingPut, _source
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.migrate import aimport_langgraph, import_langgraph
from threadloom.errors import ImportConflictError, SerializationError, StorageError
from threadloom.graph import START, StateGraph
from threadloom.types import Command, interrupt

pytestmark = pytest.mark.filterwarnings("ignore:Deserializing unregistered type")


class S(TypedDict):
    log: Annotated[list[str], operator.add]


def _interrupting(sg: Any, start: Any, ask: Any, saver: Any) -> Any:
    """a and p in parallel, then b asks: an interrupt with pending writes."""
    g = sg(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("p", lambda s: {"log": ["p"]})
    g.add_node("b", lambda s: {"log": ["b:" + ask("q?")]})
    g.add_edge(start, "a")
    g.add_edge(start, "p")
    g.add_edge("a", "b")
    g.add_edge("p", "b")
    return g.compile(checkpointer=saver)


def _live(target: Any) -> Any:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["live"]})
    g.add_edge(START, "a")
    return g.compile(checkpointer=target)


class _Recording(InMemorySaver):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("put")
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("put_writes")
        return super().put_writes(*args, **kwargs)


@pytest.mark.parametrize("where", ["list", "pending write"])
def test_a_refused_value_in_a_new_thread_writes_nothing(where: str) -> None:
    g = LGStateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    if where == "list":  # a Receipt inside a dict inside a list, from the 2nd checkpoint on
        g.add_node("b", lambda s: {"log": [{"paid": Receipt(1)}]})  # type: ignore[list-item]
        g.add_edge("a", "b")
    g.add_edge(LG_START, "a")
    src = LGMemorySaver()
    cfg = {"configurable": {"thread_id": "r"}}
    g.compile(checkpointer=src).invoke({"log": []}, cfg)
    if where == "pending write":  # only there (a task that ran, its checkpoint not yet saved)
        src.put_writes(src.get_tuple(cfg).config, [("log", [Receipt(2)])], "task-1")
    target, seen = _Recording(), []
    with pytest.raises(SerializationError, match="Receipt"):
        import_langgraph(src, target, progress=seen.append)
    assert target.calls == [] and seen == []  # was: the first checkpoints, then deleted


def test_a_failed_write_keeps_what_a_live_program_wrote_meanwhile() -> None:
    src = _source(LGMemorySaver(), {"n": 3})
    target = _FailingPut(ok=10**6)
    app, live = _live(target), []

    def progress(result: Any) -> None:
        if not live:  # the ported program, already running on the target, takes a turn
            before = _count(target, "n")
            app.invoke({"log": ["user"]}, {"configurable": {"thread_id": "n"}})
            live.append(_count(target, "n") - before)
            target.ok = 0  # then the import's next put fails (a disk full)

    with pytest.raises(StorageError, match="disk full") as info:
        import_langgraph(src, target, progress=progress)
    assert live[0] > 0 and _count(target, "n") == 1 + live[0]  # was 0: the live turn too
    notes = "".join(getattr(info.value, "__notes__", []))
    assert sys.version_info < (3, 11) or "did not write" in notes


def _interrupted() -> tuple[Any, Any, dict]:
    src = LGMemorySaver()
    lg = _interrupting(LGStateGraph, LG_START, lg_interrupt, src)
    cfg = {"configurable": {"thread_id": "t"}}
    lg.invoke({"log": ["in"]}, cfg)
    return src, lg, cfg


def test_a_rerun_after_resuming_on_the_target_writes_nothing() -> None:
    src, _, cfg = _interrupted()
    target = _Recording()
    first = import_langgraph(src, target)
    tl = _interrupting(StateGraph, START, interrupt, target)
    assert tl.invoke(Command(resume="yes"), cfg)["log"][-1] == "b:yes"
    target.calls.clear()
    again = import_langgraph(src, target)
    assert target.calls == [] and again.writes == 0  # was: __interrupt__ written again
    assert (again.skipped_writes, again.differing_writes) == (first.writes, 0)


def test_a_thread_both_programs_went_on_with_is_refused_and_left_alone() -> None:
    """Both went on differently after the import: LangGraph's new checkpoints
    used to land beside the target's own and become its state (session 13);
    the writes the target holds with other values were never overwritten."""
    src, lg, cfg = _interrupted()
    target = InMemorySaver()
    import_langgraph(src, target)
    tl = _interrupting(StateGraph, START, interrupt, target)
    tl.invoke(Command(resume="yes"), cfg)
    lg.invoke(LGCommand(resume="no"), cfg)  # the LangGraph program went on differently
    at = next(t.config for t in target.list(cfg) if t.metadata.get("step") == 1)
    before = target.get_tuple(at).pending_writes
    state = tl.get_state(cfg).values
    with pytest.raises(ImportConflictError, match="continued in threadloom") as err:
        import_langgraph(src, target)
    assert err.value.result.writes == 0 and err.value.result.checkpoints == 0
    assert target.get_tuple(at).pending_writes == before  # the target's own are left
    assert tl.get_state(cfg).values == state


class _ListRecorder:
    """Every list/alist call of a LangGraph Postgres saver, with its config."""

    lists: list[Any]

    def list(self, config: Any, **kwargs: Any) -> Any:
        self.lists.append(config)
        return super().list(config, **kwargs)  # type: ignore[misc]

    def alist(self, config: Any, **kwargs: Any) -> Any:
        self.lists.append(config)
        return super().alist(config, **kwargs)  # type: ignore[misc]


@contextmanager
def _lg_schema(pg_url: str) -> Iterator[str]:
    import psycopg

    schema = f"imp_lg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield f"-c search_path={schema}"
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_langgraph_postgres_is_read_one_checkpoint_at_a_time(pg_url: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    class Source(_ListRecorder, PostgresSaver):
        pass

    with _lg_schema(pg_url) as opts:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        with psycopg.connect(pg_url, options=opts, **kwargs) as conn:
            src = Source(conn)
            src.setup()
            _source(src, {"a": 2, "b": 1})
            src.lists = []
            target = InMemorySaver()
            result = import_langgraph(src, target)
            assert src.lists == []  # was list(None): every row of the source buffered
            assert result.threads == {"a", "b"} and _count(target, "a") == _count(src, "a")
            assert result.checkpoints == _count(src, "a") + _count(src, "b")


async def test_langgraph_async_postgres_is_read_one_checkpoint_at_a_time(pg_url: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    class Source(_ListRecorder, AsyncPostgresSaver):
        pass

    with _lg_schema(pg_url) as opts:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        async with await AsyncConnection.connect(pg_url, options=opts, **kwargs) as conn:
            src = Source(conn)
            await src.setup()
            g = _interrupting(LGStateGraph, LG_START, lg_interrupt, src)
            for tid in ("x", "y"):
                await g.ainvoke({"log": [tid]}, {"configurable": {"thread_id": tid}})
            src.lists = []
            target = InMemorySaver()
            result = await aimport_langgraph(src, target)
            assert src.lists == []  # was alist(None), then alist per thread
            assert result.threads == {"x", "y"} and result.checkpoints == 2 * 3
            assert result.writes == 2 * 8


async def test_langgraph_async_sqlite_threads_are_found_by_sql() -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    class Source(_ListRecorder, AsyncSqliteSaver):
        pass

    async with Source.from_conn_string(":memory:") as src:
        g = _interrupting(LGStateGraph, LG_START, lg_interrupt, src)
        for tid in ("x", "y"):
            await g.ainvoke({"log": [tid]}, {"configurable": {"thread_id": tid}})
        src.lists = []
        result = await aimport_langgraph(src, InMemorySaver())
    assert None not in src.lists and len(src.lists) == 2  # was alist(None) first: a full pass
    assert result.threads == {"x", "y"} and result.checkpoints == 2 * 3


def test_the_cli_refuses_a_thread_both_programs_went_on_with(tmp_path, capsys) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.cli import main

    src, dest = tmp_path / "lg.db", tmp_path / "tl.db"
    cfg = {"configurable": {"thread_id": "d"}}
    with LGSqliteSaver.from_conn_string(str(src)) as lg_saver:
        lg = _interrupting(LGStateGraph, LG_START, lg_interrupt, lg_saver)
        lg.invoke({"log": []}, cfg)
        assert main(["import-langgraph", str(src), str(dest)]) == 0
        with SqliteSaver.from_conn_string(str(dest)) as target:
            tl = _interrupting(StateGraph, START, interrupt, target)
            tl.invoke(Command(resume="yes"), cfg)
        lg.invoke(LGCommand(resume="no"), cfg)  # the LangGraph program went on differently
    capsys.readouterr()
    assert main(["import-langgraph", str(src), str(dest)]) == 1
    err = capsys.readouterr().err
    assert "continued in threadloom" in err and "--thread" in err

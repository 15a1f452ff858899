"""Importing a LangGraph checkpointer's threads into a threadloom saver.

A ported program pointed at its old LangGraph database saw empty threads
(threadloom keeps its own tables). After ``import_langgraph`` the threadloom
graph must show the same state and history as LangGraph's (same checkpoint
ids), and an interrupted thread must resume to the same result on both.
"""

from __future__ import annotations

import operator
import warnings
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.graph import add_messages as lg_add_messages
from typing_extensions import TypedDict

from tests.parity import helpers as h
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.migrate import import_langgraph
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.errors import ConfigError
from threadloom.graph import add_messages as tl_add_messages

THREADS = ("t1", "t2")


class Sub(TypedDict):
    log: Annotated[list[str], operator.add]


class LGState(TypedDict):
    log: Annotated[list[str], operator.add]
    messages: Annotated[list, lg_add_messages]


class TLState(TypedDict):
    log: Annotated[list[str], operator.add]
    messages: Annotated[list, tl_add_messages]


def build(lib: Any, saver: Any) -> Any:
    State = LGState if lib.name == "langgraph" else TLState

    sub = lib.StateGraph(Sub)
    sub.add_node("s1", lambda s: {"log": ["s1"]})
    sub.add_edge(lib.START, "s1")
    child = sub.compile()

    def fan(state: dict) -> list:
        return [lib.Send("item", {"log": [f"i{n}"]}) for n in range(2)]

    def ask(state: dict) -> dict:
        answer = lib.interrupt("ok?")
        return {"log": [f"ask:{answer}"]}

    b = lib.StateGraph(State)
    b.add_node(
        "first",
        lambda s: {"log": ["first"], "messages": [{"role": "user", "content": "hi", "id": "m1"}]},
    )
    b.add_node("item", lambda s: {"log": s["log"]})
    b.add_node("child", child)
    b.add_node("ask", ask)
    b.add_edge(lib.START, "first")
    b.add_conditional_edges("first", fan, ["item"])
    b.add_edge("item", "child")
    b.add_edge("child", "ask")
    return b.compile(checkpointer=saver)


def _run_langgraph(lg_saver: Any) -> Any:
    lib = h._lib("langgraph")
    graph = build(lib, lg_saver)
    for tid in THREADS:
        graph.invoke({"log": [], "messages": []}, {"configurable": {"thread_id": tid}})
    graph.invoke(lib.Command(resume="yes"), {"configurable": {"thread_id": "t2"}})
    return graph


def _views(graph: Any, tid: str) -> Any:
    cfg = {"configurable": {"thread_id": tid}}
    norm = h.Normalizer()
    state = graph.get_state(cfg, subgraphs=True)
    history = list(graph.get_state_history(cfg))
    return norm(
        {
            "state": state,
            "history": [(s.config, s.parent_config, s.metadata, s.values, s.next) for s in history],
        }
    )


@pytest.mark.parametrize("source_kind", ["memory", "sqlite"])
def test_threads_read_and_resume_the_same(source_kind: str, tmp_path: Path) -> None:
    lg = h._lib("langgraph")
    tl = h._lib("threadloom")
    with h.open_saver(lg, source_kind) as lg_saver:
        lg_graph = _run_langgraph(lg_saver)
        with SqliteSaver.from_conn_string(str(tmp_path / "tl.db")) as tl_saver:
            result = import_langgraph(lg_saver, tl_saver)
            assert result.threads == set(THREADS) and result.checkpoints > 10 and result.writes
            tl_graph = build(tl, tl_saver)
            for tid in THREADS:
                assert _views(tl_graph, tid) == _views(lg_graph, tid), tid
            cfg = {"configurable": {"thread_id": "t1"}}
            lg_done = lg_graph.invoke(lg.Command(resume="later"), cfg)
            tl_done = tl_graph.invoke(tl.Command(resume="later"), cfg)
            assert h.Normalizer()(tl_done) == h.Normalizer()(lg_done)
            assert tl_done["log"][-1] == "ask:later"


def test_import_again_skips_and_one_thread_only() -> None:
    lg = h._lib("langgraph")
    with h.open_saver(lg, "memory") as lg_saver:
        _run_langgraph(lg_saver)
        target = InMemorySaver()
        only = import_langgraph(lg_saver, target, thread_ids=["t1"])
        assert only.threads == {"t1"} and only.skipped == 0
        again = import_langgraph(lg_saver, target)
        assert again.skipped == only.checkpoints and again.checkpoints > 0
        assert again.threads == set(THREADS)
        pending = target.get_tuple({"configurable": {"thread_id": "t1"}}).pending_writes
        assert len(pending) == len({(w[0], w[1]) for w in pending})  # stored once


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ConfigError, match="LangGraph checkpointer"):
        import_langgraph(object(), InMemorySaver())
    lg = h._lib("langgraph")
    with h.open_saver(lg, "memory") as lg_saver:
        with pytest.raises(ConfigError, match="one string"):
            import_langgraph(lg_saver, InMemorySaver(), thread_ids="t1")


def test_cli_imports_a_langgraph_file_read_only(tmp_path: Path, capsys: Any) -> None:
    import hashlib

    from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

    from threadloom.cli import main

    src, dest = tmp_path / "lg.db", tmp_path / "tl.db"
    with LGSqliteSaver.from_conn_string(str(src)) as lg_saver:
        lg_graph = _run_langgraph(lg_saver)
        expected = _views(lg_graph, "t2")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    assert main(["import-langgraph", str(src), str(dest), "--thread", "t2"]) == 0
    assert "of 1 threads" in capsys.readouterr().out
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest  # source untouched
    with SqliteSaver.from_conn_string(str(dest)) as tl_saver:
        assert _views(build(h._lib("threadloom"), tl_saver), "t2") == expected
        assert tl_saver.get_tuple({"configurable": {"thread_id": "t1"}}) is None
    assert main(["import-langgraph", str(tmp_path / "nope.db"), str(dest)]) == 1
    assert main(["import-langgraph", str(dest), str(tmp_path / "x.db")]) == 1  # not LangGraph's
    assert "no LangGraph checkpoints" in capsys.readouterr().err


def test_from_langgraph_postgres(pg_url: str) -> None:
    import uuid

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as LGPostgresSaver
    from psycopg.rows import dict_row

    from threadloom.checkpoint.postgres import PostgresSaver

    lg_schema, tl_schema = (f"imp_{k}_{uuid.uuid4().hex[:8]}" for k in ("lg", "tl"))
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{lg_schema}"')
        try:
            kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            opts = f"-c search_path={lg_schema}"
            with psycopg.connect(pg_url, options=opts, **kwargs) as lg_conn:
                lg_saver = LGPostgresSaver(lg_conn)
                lg_saver.setup()
                lg_graph = _run_langgraph(lg_saver)
                with PostgresSaver.from_conn_string(pg_url, schema=tl_schema) as tl_saver:
                    tl_saver.setup()
                    result = import_langgraph(lg_saver, tl_saver)
                    assert result.threads == set(THREADS)
                    tl_graph = build(h._lib("threadloom"), tl_saver)
                    for tid in THREADS:
                        assert _views(tl_graph, tid) == _views(lg_graph, tid), tid
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{lg_schema}" CASCADE')
            admin.execute(f'DROP SCHEMA IF EXISTS "{tl_schema}" CASCADE')


async def test_async_import_from_langgraph_async_saver() -> None:
    from threadloom.checkpoint.migrate import aimport_langgraph

    lg = h._lib("langgraph")
    async with h.aopen_saver(lg, "sqlite") as lg_saver:
        graph = build(lg, lg_saver)
        for tid in THREADS:
            await graph.ainvoke({"log": [], "messages": []}, {"configurable": {"thread_id": tid}})
        expected: dict[str, list] = {}
        for tid in THREADS:
            cfg = {"configurable": {"thread_id": tid}}
            expected[tid] = [s.config async for s in graph.aget_state_history(cfg)]
        with pytest.raises(ConfigError, match="alist"):
            await aimport_langgraph(object(), InMemorySaver())
        target = InMemorySaver()
        seen: list[int] = []
        result = await aimport_langgraph(lg_saver, target, progress=lambda r: seen.append(r.writes))
    assert result.threads == set(THREADS) and seen and seen[-1] == result.writes
    tl_graph = build(h._lib("threadloom"), target)
    for tid in THREADS:
        got = [s.config for s in tl_graph.get_state_history({"configurable": {"thread_id": tid}})]
        assert got == expected[tid]


def test_opening_a_langgraph_file_warns_until_imported(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

    from threadloom.checkpoint.sqlite.lgfile import LangGraphDataWarning

    path = str(tmp_path / "app.db")
    with LGSqliteSaver.from_conn_string(path) as lg_saver:
        _run_langgraph(lg_saver)
    with pytest.warns(LangGraphDataWarning, match="import-langgraph"):
        with SqliteSaver.from_conn_string(path) as saver:
            assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", LangGraphDataWarning)
        from threadloom.cli import main

        assert main(["import-langgraph", path, path]) == 0
        with SqliteSaver.from_conn_string(path) as saver:  # imported: no warning
            assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is not None


def test_a_foreign_checkpoints_table_does_not_warn(tmp_path: Path) -> None:
    import sqlite3

    path = str(tmp_path / "app.db")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, label TEXT)")
        conn.execute("CREATE TABLE writes (id INTEGER PRIMARY KEY)")
        conn.execute("INSERT INTO checkpoints (label) VALUES ('mine')")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SqliteSaver.from_conn_string(path):
            pass


def test_a_class_langgraph_cannot_rebuild_here_is_refused_not_flattened() -> None:
    import dataclasses
    import sys
    import types as pytypes

    from threadloom.errors import SerializationError

    mod = pytypes.ModuleType("tl_import_gone_mod")

    @dataclasses.dataclass
    class Point:
        x: int

    Point.__module__ = mod.__name__
    mod.Point = Point
    sys.modules[mod.__name__] = mod
    lg = h._lib("langgraph")
    with h.open_saver(lg, "memory") as lg_saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        checkpoint = lg_saver.serde.loads_typed(lg_saver.serde.dumps_typed(_lg_empty()))
        checkpoint["channel_values"] = {"p": Point(1)}
        checkpoint["channel_versions"] = {"p": 1}
        lg_saver.put(config, checkpoint, {"step": 0}, {"p": 1})
        del sys.modules[mod.__name__]  # the class no longer imports in this process
        target = InMemorySaver()
        with pytest.raises(SerializationError, match="tl_import_gone_mod.Point"):
            import_langgraph(lg_saver, target)
    assert target.get_tuple({"configurable": {"thread_id": "t"}}) is None


def _lg_empty() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()

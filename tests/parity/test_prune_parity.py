"""Parity with LangGraph's PostgresSaver, the one LangGraph saver with ``prune``.

After ``prune([thread], strategy="keep_latest")`` what a user sees is the same
on both: the latest state, its pending interrupt, a kept checkpoint with no
parent (threadloom named the deleted one; probe12 p19), the history, a replay
and a fork from it, a resume, and an unpruned thread untouched. ``prune("t1")`` is a ``TypeError`` on both.
threadloom returns a ``PruneReport`` where LangGraph returns None (not compared;
docs/compatibility.md, "Retention").
"""

from __future__ import annotations

import contextlib
import operator
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h

T1 = {"configurable": {"thread_id": "t1"}}
T2 = {"configurable": {"thread_id": "t2"}}


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def build(lib: Any, saver: Any) -> Any:
    """START -> a -> sub (s1) -> ask (interrupts)."""
    sub = lib.StateGraph(State).add_node("s1", lambda s: {"log": ["s1"]})
    sub.add_edge(lib.START, "s1")

    def ask(state: State) -> dict:
        return {"log": [f"ask {lib.interrupt('q')}"]}

    builder = lib.StateGraph(State).add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("sub", sub.compile()).add_node("ask", ask)
    builder.add_edge(lib.START, "a").add_edge("a", "sub").add_edge("sub", "ask")
    return builder.compile(checkpointer=saver)


def _inventory(items: list[Any]) -> tuple[int, list[str]]:
    spaces = {t.config["configurable"]["checkpoint_ns"].split(":")[0] for t in items}
    return len(items), sorted(spaces)


def _bare_id(call: Any) -> Any:
    try:
        call()
    except TypeError as exc:
        return ("raises", "TypeError", "thread_ids" in str(exc))
    return "no error"


def scenario(lib: Any, saver: Any) -> list[tuple[str, Any]]:
    graph = build(lib, saver)
    for config in (T1, T2):
        graph.invoke({"log": []}, config)
        graph.invoke(lib.Command(resume=1), config)
        graph.invoke({"log": ["again"]}, config)  # interrupted again
    obs: list[tuple[str, Any]] = [("before", _inventory(list(saver.list(T1))))]
    obs.append(("bare id", _bare_id(lambda: saver.prune("t1"))))
    saver.prune(["t1"], strategy="keep_latest")
    obs.append(("after", _inventory(list(saver.list(T1)))))
    state = graph.get_state(T1)
    obs.append(("state", state))
    obs.append(("parent", state.parent_config))
    obs.append(("history", list(graph.get_state_history(T1))))
    obs.append(("listed before", list(saver.list(T1, before=state.config))))
    obs.append(("replay", graph.invoke(None, state.config)))  # from the kept one
    obs.append(("replayed state", graph.get_state(T1)))
    fork = graph.update_state(state.config, {"log": ["fork"]})
    obs.append(("fork", graph.get_state(fork)))
    obs.append(("resume", graph.invoke(lib.Command(resume=2), T1)))
    history = list(graph.get_state_history(T1))
    obs.append(("history after resume", history))
    obs.append(("oldest has no parent", history[-1].parent_config is None))
    obs.append(("untouched", _inventory(list(saver.list(T2)))))
    saver.prune(["t2"], strategy="delete")
    obs.append(("deleted", list(saver.list(T2))))
    return obs


async def ascenario(lib: Any, saver: Any) -> list[tuple[str, Any]]:
    graph = build(lib, saver)
    await graph.ainvoke({"log": []}, T1)
    await graph.ainvoke({"log": ["again"]}, T1)
    await saver.aprune(["t1"], strategy="keep_latest")
    state = await graph.aget_state(T1)
    obs: list[tuple[str, Any]] = [("state", state)]
    obs.append(("history", [s async for s in graph.aget_state_history(T1)]))
    obs.append(("resume", await graph.ainvoke(lib.Command(resume=3), T1)))
    return obs


@contextlib.contextmanager
def _schemas(pg_url: str) -> Iterator[tuple[str, str]]:
    import psycopg

    names = tuple(f"prune_{k}_{uuid.uuid4().hex[:8]}" for k in ("lg", "tl"))
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{names[0]}"')
        try:
            yield names
        finally:
            for name in names:
                admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _lg_kwargs() -> dict[str, Any]:
    from psycopg.rows import dict_row

    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def test_keep_latest_matches_langgraph_postgres(pg_url: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as LGPostgresSaver

    from threadloom.checkpoint.postgres import PostgresSaver

    with _schemas(pg_url) as (lg_schema, tl_schema):
        opts = f"-c search_path={lg_schema}"
        with psycopg.connect(pg_url, options=opts, **_lg_kwargs()) as conn:
            lg_saver = LGPostgresSaver(conn)
            lg_saver.setup()
            oracle = scenario(h._lib("langgraph"), lg_saver)
        with PostgresSaver.from_conn_string(pg_url, schema=tl_schema) as tl_saver:
            tl_saver.setup()
            ours = scenario(h._lib("threadloom"), tl_saver)
    h.compare(oracle, ours)
    assert dict(ours)["parent"] is None and dict(ours)["bare id"][1] == "TypeError"


@contextlib.asynccontextmanager
async def _alg(pg_url: str, schema: str) -> AsyncIterator[Any]:
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as LGAsyncPostgresSaver

    opts = f"-c search_path={schema}"
    conn = await psycopg.AsyncConnection.connect(pg_url, options=opts, **_lg_kwargs())
    async with conn:
        saver = LGAsyncPostgresSaver(conn)
        await saver.setup()
        yield saver


async def test_async_keep_latest_matches_langgraph_postgres(pg_url: str) -> None:
    from threadloom.checkpoint.postgres.aio import AsyncPostgresSaver

    with _schemas(pg_url) as (lg_schema, tl_schema):
        async with _alg(pg_url, lg_schema) as lg_saver:
            oracle = await ascenario(h._lib("langgraph"), lg_saver)
        async with AsyncPostgresSaver.from_conn_string(pg_url, schema=tl_schema) as tl_saver:
            await tl_saver.setup()
            ours = await ascenario(h._lib("threadloom"), tl_saver)
    h.compare(oracle, ours)
    assert dict(ours)["state"].parent_config is None


@pytest.mark.parametrize("strategy", ["keep_latest", "delete"])
def test_unknown_thread_and_strategy_errors_match(pg_url: str, strategy: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as LGPostgresSaver

    from threadloom.checkpoint.postgres import PostgresSaver

    def errors(saver: Any, lib: Any) -> list[Any]:
        return [
            h.raises(lambda: saver.prune(["nobody"], strategy=strategy) and None, lib),
            h.raises(lambda: saver.prune(["nobody"], strategy="nope"), lib),
        ]

    with _schemas(pg_url) as (lg_schema, tl_schema):
        opts = f"-c search_path={lg_schema}"
        with psycopg.connect(pg_url, options=opts, **_lg_kwargs()) as conn:
            lg_saver = LGPostgresSaver(conn)
            lg_saver.setup()
            oracle = errors(lg_saver, h._lib("langgraph"))
        with PostgresSaver.from_conn_string(pg_url, schema=tl_schema) as tl_saver:
            tl_saver.setup()
            ours = errors(tl_saver, h._lib("threadloom"))
    assert ours == oracle == [None, ("raises", "ValueError")]


@pytest.mark.parametrize("how", [{"strategy": "keep_latest"}, {"keep_last": 2}])
def test_imported_delta_thread_pruned_keeps_its_values(how: dict) -> None:
    """A LangGraph ``DeltaChannel`` thread, imported: LangGraph's PostgresSaver
    refuses ``keep_latest`` on it; threadloom prunes it keeping the ancestors the
    value is rebuilt from, so the state and a resumed run match LangGraph's."""
    from langgraph.checkpoint.memory import InMemorySaver as LGInMemorySaver
    from langgraph.types import Command as LGCommand

    from tests.parity import test_delta_channel_import as d
    from threadloom.checkpoint.memory import InMemorySaver
    from threadloom.checkpoint.migrate import import_langgraph
    from threadloom.types import Command

    lg_saver, tl_saver = LGInMemorySaver(), InMemorySaver()
    lg = d.build(True, lg_saver)
    d._drive(lg, LGCommand, "sync")
    import_langgraph(lg_saver, tl_saver)
    before = len(list(tl_saver.list(d.CFG)))
    how = how if "strategy" in how else {"strategy": "keep_last_n", **how}
    tl_saver.prune(["d"], **how)
    assert len(list(tl_saver.list(d.CFG))) < before  # pruned, not refused
    tl = d.build(False, tl_saver)
    assert tl.get_state(d.CFG).values == lg.get_state(d.CFG).values
    for tup in tl_saver.list(d.CFG):
        assert tup.parent_config is None or tl_saver.get_tuple(tup.parent_config) is not None
    step = {"items": ["more"], "n": 8}
    ours, theirs = tl.invoke(step, d.CFG), lg.invoke(step, d.CFG)
    if "__interrupt__" in theirs:
        ours, theirs = (
            tl.invoke(Command(resume="z"), d.CFG),
            lg.invoke(LGCommand(resume="z"), d.CFG),
        )
    assert ours == theirs

"""A LangGraph thread that used ``DeltaChannel``, imported into threadloom.

LangGraph stores the channel's value only at snapshots (every
``snapshot_frequency`` updates); the checkpoints in between hold nothing for it.
After ``import_langgraph`` threadloom rebuilds those values from the imported
writes (``get_delta_channel_history``), so the state, the history, a past
checkpoint, a fork and a resumed run must match LangGraph's own.
"""

import operator
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langgraph.channels import DeltaChannel as LGDelta
from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as LGAsyncSqliteSaver
from langgraph.graph import StateGraph as LGStateGraph
from langgraph.types import Command as LGCommand
from langgraph.types import Overwrite as LGOverwrite
from langgraph.types import Send as LGSend
from langgraph.types import interrupt as lg_interrupt
from typing_extensions import TypedDict

from tests.parity import helpers as h
from threadloom.channels import DeltaChannel
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.migrate import aimport_langgraph, import_langgraph
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadloom.errors import StorageError
from threadloom.graph import StateGraph
from threadloom.types import Command, Overwrite, Send, interrupt

FREQ = 4
RUNS = 9  # about 4 updates per run: > FREQ, so LangGraph snapshots and replays


def extend(state: list, writes: Sequence[Any]) -> list:
    out = list(state)
    for w in writes:
        out.extend(w if isinstance(w, list) else [w])
    return out


class LGState(TypedDict):
    items: Annotated[list, LGDelta(extend, snapshot_frequency=FREQ)]
    n: int


class TLState(TypedDict):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=FREQ)]
    n: int


def build(lg: bool, saver: Any) -> Any:
    StateGraph_, Send_, Overwrite_, interrupt_ = (
        (LGStateGraph, LGSend, LGOverwrite, lg_interrupt)
        if lg
        else (StateGraph, Send, Overwrite, interrupt)
    )

    def head(s: dict) -> dict:
        if s["n"] == 5:
            return {"items": Overwrite_([f"reset{s['n']}"]), "n": s["n"] + 1}
        return {"items": [f"h{s['n']}"], "n": s["n"] + 1}

    def ask(s: dict) -> dict:
        if s["n"] % 4 == 0:
            return {"items": [f"ask:{interrupt_(len(s['items']))}"]}
        return {}

    b = StateGraph_(LGState if lg else TLState)
    b.add_node("head", head)
    b.add_node("left", lambda s: {"items": ["L"]})
    b.add_node("right", lambda s: {"items": ["R1", "R2"]})
    b.add_node("item", lambda s: {"items": [f"i{s['n']}"]})
    b.add_node("ask", ask)
    b.add_edge("__start__", "head")
    b.add_edge("head", "left")
    b.add_edge("head", "right")
    b.add_conditional_edges(
        "head", lambda s: [Send_("item", {"items": [], "n": k}) for k in range(2)], ["item"]
    )
    b.add_edge(["left", "right", "item"], "ask")
    return b.compile(checkpointer=saver)


CFG = {"configurable": {"thread_id": "d"}}


def _drive(graph: Any, command: Any, durability: str) -> list:
    """RUNS inputs, answering each interrupt; what each returned."""
    out = []
    for i in range(RUNS):
        result = graph.invoke({"items": [f"in{i}"], "n": i}, CFG, durability=durability)
        if "__interrupt__" in result:
            result = graph.invoke(command(resume=f"yes{i}"), CFG, durability=durability)
        out.append(result)
    return out


def _view(graph: Any) -> list:
    return [
        (s.values, s.next, s.config["configurable"]["checkpoint_id"])
        for s in graph.get_state_history(CFG)
    ]


def _continue(graph: Any, command: Any, history: list) -> list:
    """What a user does next on an imported thread: run on, fork, read the fork."""
    obs = [graph.invoke({"items": ["more"], "n": 8}, CFG)]
    if "__interrupt__" in obs[-1]:
        obs.append(graph.invoke(command(resume="late"), CFG))
    conf = {**CFG["configurable"], "checkpoint_ns": "", "checkpoint_id": history[7][2]}
    past = {"configurable": conf}
    obs.append(graph.get_state(past).values)
    forked = graph.update_state(past, {"items": ["forked"]}, as_node="left")
    obs.append(graph.get_state(forked).values)
    obs.append(graph.invoke(None, forked))
    obs.append(graph.get_state(CFG).values)
    return obs


@pytest.mark.parametrize("durability", ["sync", "exit"])
@pytest.mark.parametrize("target_kind", ["memory", "sqlite"])
def test_imported_thread_reads_and_resumes_like_langgraph(tmp_path, durability, target_kind):
    with LGSqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as lg_saver:
        lg = build(True, lg_saver)
        _drive(lg, LGCommand, durability)
        lg_history = _view(lg)
        absent = [
            t
            for t in lg_saver.list(CFG)
            if "items" not in t.checkpoint["channel_values"]
            and "items" in t.checkpoint["channel_versions"]
        ]
        assert absent, "LangGraph stored every value: the replay path is not exercised"
        with (
            SqliteSaver.from_conn_string(str(tmp_path / "tl.db"))
            if target_kind == "sqlite"
            else _nullcm(InMemorySaver())
        ) as tl_saver:
            import_langgraph(lg_saver, tl_saver)
            tl = build(False, tl_saver)
            assert _view(tl) == lg_history
            assert tl.get_state(CFG).values == lg.get_state(CFG).values
            h.compare(
                [("continue", _continue(lg, LGCommand, lg_history))],
                [("continue", _continue(tl, Command, lg_history))],
            )


class _nullcm:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: object) -> None:
        return None


async def test_imported_thread_async(tmp_path):
    """LangGraph's AsyncSqliteSaver as the source (task paths read through its
    aiosqlite connection), threadloom's AsyncSqliteSaver as the target."""
    async with LGAsyncSqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as lg_saver:
        lg = build(True, lg_saver)
        for i in range(RUNS):
            out = await lg.ainvoke({"items": [f"in{i}"], "n": i}, CFG)
            if "__interrupt__" in out:
                await lg.ainvoke(LGCommand(resume=f"yes{i}"), CFG)
        # values only: `next` of a waiting edge differs on a thread LangGraph's async
        # loop wrote (not a DeltaChannel matter; see the session report)
        expected = [s.values async for s in lg.aget_state_history(CFG)]
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "tl.db")) as tl_saver:
            await aimport_langgraph(lg_saver, tl_saver)
            tl = build(False, tl_saver)
            got = [s.values async for s in tl.aget_state_history(CFG)]
            assert got == expected
            ours = await tl.ainvoke({"items": ["more"], "n": 1}, CFG)
        assert ours == await lg.ainvoke({"items": ["more"], "n": 1}, CFG)


def test_a_lost_ancestor_fails_loudly():
    """A value that cannot be rebuilt (the LangGraph thread lost a checkpoint it
    depends on) is an error naming thread and key, never an empty list."""
    from langgraph.checkpoint.memory import InMemorySaver as LGInMemorySaver

    lg_saver = LGInMemorySaver()
    _drive(build(True, lg_saver), LGCommand, "sync")
    latest = lg_saver.get_tuple(CFG)
    assert "items" not in latest.checkpoint["channel_values"]  # rebuilt from its ancestors
    lost = latest.parent_config["configurable"]["checkpoint_id"]
    del lg_saver.storage["d"][""][lost]  # the oracle's own dict: a thread missing one row
    tl_saver = InMemorySaver()
    import_langgraph(lg_saver, tl_saver)
    with pytest.raises(StorageError, match=r"\['items'\] of thread 'd'") as info:
        build(False, tl_saver).get_state(CFG)
    assert lost in str(info.value)


def test_from_langgraph_postgres(pg_url: str) -> None:
    """LangGraph's PostgresSaver as the source: task paths read by SQL."""
    import uuid

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as LGPostgresSaver
    from psycopg.rows import dict_row

    schema = f"delta_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            with psycopg.connect(pg_url, options=f"-c search_path={schema}", **kwargs) as conn:
                lg_saver = LGPostgresSaver(conn)
                lg_saver.setup()
                lg = build(True, lg_saver)
                _drive(lg, LGCommand, "sync")
                tl_saver = InMemorySaver()
                import_langgraph(lg_saver, tl_saver)
                assert _view(build(False, tl_saver)) == _view(lg)
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_from_langgraph_memory_saver() -> None:
    """LangGraph's InMemorySaver as the source: task paths from its write records."""
    from langgraph.checkpoint.memory import InMemorySaver as LGInMemorySaver

    lg_saver = LGInMemorySaver()
    lg = build(True, lg_saver)
    _drive(lg, LGCommand, "sync")
    tl_saver = InMemorySaver()
    import_langgraph(lg_saver, tl_saver)
    assert _view(build(False, tl_saver)) == _view(lg)


class LGPlain(TypedDict):
    items: Annotated[list, operator.add]
    n: int


class TLPlain(TypedDict):
    items: Annotated[list, operator.add]
    n: int


def test_key_changed_to_a_plain_reducer_reads_like_langgraph() -> None:
    """A thread written with DeltaChannel, read by a graph whose key is now
    ``Annotated[list, operator.add]``: both libraries rebuild it from the writes."""
    from langgraph.checkpoint.memory import InMemorySaver as LGInMemorySaver

    lg_saver = LGInMemorySaver()
    _drive(build(True, lg_saver), LGCommand, "sync")
    tl_saver = InMemorySaver()
    import_langgraph(lg_saver, tl_saver)

    def plain(lg: bool, saver: Any) -> Any:
        b = (LGStateGraph if lg else StateGraph)(LGPlain if lg else TLPlain)
        b.add_node("head", lambda s: {"items": ["plain"]})
        b.add_edge("__start__", "head")
        return b.compile(checkpointer=saver)

    lg, tl = plain(True, lg_saver), plain(False, tl_saver)
    assert [s.values for s in tl.get_state_history(CFG)] == [
        s.values for s in lg.get_state_history(CFG)
    ]
    assert tl.invoke({"items": ["x"], "n": 0}, CFG) == lg.invoke({"items": ["x"], "n": 0}, CFG)


class TLQuiet(TypedDict):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=FREQ)]
    n: int


@pytest.mark.parametrize("how", ["run", "update_state", "copy"])
@pytest.mark.parametrize("target_kind", ["memory", "sqlite"])
def test_threadloom_checkpoints_after_a_rebuild_hold_the_value(tmp_path, how, target_kind):
    """A run (or update_state) on an imported thread that does not write the key
    stores the rebuilt value in its own checkpoints: prune(keep_latest) then keeps
    the state (it used to read as [] once the LangGraph ancestors were gone)."""
    from langgraph.checkpoint.memory import InMemorySaver as LGInMemorySaver

    lg_saver = LGInMemorySaver()
    _drive(build(True, lg_saver), LGCommand, "sync")
    with (
        SqliteSaver.from_conn_string(str(tmp_path / "tl.db"))
        if target_kind == "sqlite"
        else _nullcm(InMemorySaver())
    ) as tl_saver:
        import_langgraph(lg_saver, tl_saver)
        b = StateGraph(TLQuiet)
        b.add_node("quiet", lambda s: {"n": s["n"] + 1})
        b.add_edge("__start__", "quiet")
        graph = b.compile(checkpointer=tl_saver)
        expected = graph.get_state(CFG).values["items"]
        if how == "run":
            graph.invoke({"n": 100}, CFG)
        elif how == "update_state":
            graph.update_state(CFG, {"n": 100})
        else:  # a sibling of the latest checkpoint, same values
            graph.update_state(CFG, None, as_node="__copy__")
        latest = tl_saver.get_tuple(CFG)
        assert latest.checkpoint["channel_values"]["items"] == expected
        tl_saver.prune(["d"], strategy="keep_latest")
        assert graph.get_state(CFG).values["items"] == expected

"""Compiled StateGraphs running on the threadloom runtime."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

pytest.importorskip("threadloom.pregel.main")

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import InvalidUpdateError
from threadloom.graph import END, START, MessagesState, StateGraph
from threadloom.types import Command, Overwrite, Send

CFG = {"configurable": {"thread_id": "t"}}


class S(TypedDict):
    n: int
    log: Annotated[list[str], operator.add]


def test_unknown_key_names_node_and_key() -> None:
    g = StateGraph(S)
    g.add_node("typo", lambda s: {"lgo": ["x"]})
    g.add_edge(START, "typo")
    with pytest.raises(
        InvalidUpdateError, match=r"node 'typo' returned unknown state key\(s\) \['lgo'\]"
    ):
        g.compile().invoke({"n": 0, "log": []})


def test_non_dict_return_is_rejected() -> None:
    g = StateGraph(S)
    g.add_node("bad", lambda s: 5)
    g.add_edge(START, "bad")
    with pytest.raises(InvalidUpdateError, match="node 'bad' must return a dict"):
        g.compile().invoke({"n": 0, "log": []})


def test_overwrite_bypasses_reducer() -> None:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("reset", lambda s: {"log": Overwrite(["clean"])})
    g.add_edge(START, "a")
    g.add_edge("a", "reset")
    assert g.compile().invoke({"n": 0, "log": ["in"]})["log"] == ["clean"]


def test_branch_sees_the_nodes_own_update() -> None:
    seen: list[int] = []

    def route(s: S) -> str:
        seen.append(s["n"])
        return END

    g = StateGraph(S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", route)
    g.compile().invoke({"n": 1, "log": []})
    assert seen == [2]


def test_send_map_reduce_and_command_goto() -> None:
    def fan(s: S) -> list[Send]:
        return [Send("work", {"n": i, "log": []}) for i in range(3)]

    def work(s: S) -> Command:
        return Command(update={"log": [f"w{s['n']}"]}, goto="total")

    g = StateGraph(S)
    g.add_node("plan", lambda s: {"log": ["plan"]})
    g.add_node("work", work, destinations=("total",))
    g.add_node("total", lambda s: {"n": len(s["log"])})
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan, ["work"])
    out = g.compile().invoke({"n": 0, "log": []})
    assert sorted(out["log"]) == ["plan", "w0", "w1", "w2"]
    assert out["n"] == 4


def test_join_waits_for_both() -> None:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b1", lambda s: {"log": ["b1"]})
    g.add_node("b2", lambda s: {"log": ["b2"]})
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a")
    g.add_edge(START, "b1")
    g.add_edge("b1", "b2")
    g.add_edge(["a", "b2"], "c")
    compiled = g.compile()
    assert "join:a+b2:c" in compiled.channels
    assert compiled.invoke({"n": 0, "log": []})["log"] == ["a", "b1", "b2", "c"]


@dataclass
class Item:
    sku: str
    qty: int = 1


@dataclass
class Cart:
    items: Annotated[list[Item], operator.add] = field(default_factory=list)
    note: str = ""


def test_dataclass_state_round_trips_through_the_saver() -> None:
    def add(state: Cart) -> dict:
        assert isinstance(state, Cart)
        return {"items": [Item("tea")], "note": f"{len(state.items)} before"}

    g = StateGraph(Cart)
    g.add_node("add", add)
    g.add_edge(START, "add")
    graph = g.compile(checkpointer=InMemorySaver())
    graph.invoke({"items": [Item("mug", 2)]}, CFG)
    out = graph.invoke({"items": []}, CFG)
    assert out["items"] == [Item("mug", 2), Item("tea"), Item("tea")]
    assert graph.get_state(CFG).values["note"] == "2 before"


class Profile(BaseModel):
    name: str = ""
    visits: Annotated[int, operator.add] = 0


def test_pydantic_state() -> None:
    g = StateGraph(Profile)
    g.add_node("visit", lambda p: {"visits": 1, "name": p.name.upper()})
    g.add_edge(START, "visit")
    out = g.compile().invoke({"name": "ada", "visits": 1})
    assert out == {"name": "ADA", "visits": 2}


def test_config_is_injected() -> None:
    def node(state: S, config: dict[str, Any]) -> dict:
        return {"log": [config["configurable"]["thread_id"]]}

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    out = g.compile(checkpointer=InMemorySaver()).invoke({"n": 0, "log": []}, CFG)
    assert out["log"] == ["t"]


async def test_async_nodes_and_async_route() -> None:
    async def node(state: S) -> dict:
        return {"n": state["n"] + 1}

    async def route(state: S) -> str:
        return "node" if state["n"] < 3 else END

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_conditional_edges("node", route)
    assert (await g.compile().ainvoke({"n": 0, "log": []}))["n"] == 3


def test_subgraph_as_node_and_memory() -> None:
    sub = StateGraph(MessagesState)
    sub.add_node(
        "echo",
        lambda s: {"messages": [{"role": "assistant", "content": s["messages"][-1]["content"]}]},
    )
    sub.add_edge(START, "echo")
    g = StateGraph(MessagesState)
    g.add_node("sub", sub.compile())
    g.add_edge(START, "sub")
    graph = g.compile(checkpointer=InMemorySaver())
    graph.invoke({"messages": [{"role": "user", "content": "one"}]}, CFG)
    out = graph.invoke({"messages": [{"role": "user", "content": "two"}]}, CFG)
    assert [m["content"] for m in out["messages"]] == ["one", "one", "two", "two"]


def test_interrupt_before_and_get_graph() -> None:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"n": 1})
    g.add_node("b", lambda s: {"n": 2})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    graph = g.compile(checkpointer=InMemorySaver(), interrupt_before=["b"])
    graph.invoke({"n": 0, "log": []}, CFG)
    assert graph.get_state(CFG).next == ("b",)
    assert graph.invoke(None, CFG)["n"] == 2
    assert "a --> b;" in graph.get_graph().draw_mermaid()


def test_parallel_writes_to_last_value_conflict() -> None:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"n": 1})
    g.add_node("b", lambda s: {"n": 2})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    with pytest.raises(InvalidUpdateError):
        g.compile().invoke({"n": 0, "log": []})


@dataclass
class Ctx:
    user: str


def test_runtime_context_reaches_nodes_and_routes() -> None:
    from threadloom.graph.runtime import Runtime

    def node(state: S, runtime: Runtime[Ctx]) -> dict:
        return {"log": [f"node:{runtime.context.user}"]}

    def route(state: S, runtime: Runtime[Ctx]) -> str:
        return END if runtime.context.user == "ada" else "node"

    g = StateGraph(S, context_schema=Ctx)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_conditional_edges("node", route)
    graph = g.compile(checkpointer=InMemorySaver())
    out = graph.invoke({"n": 0, "log": []}, CFG, context=Ctx("ada"))
    assert out["log"] == ["node:ada"]
    stored = graph.checkpointer.get_tuple(CFG)
    assert "ada" not in repr(stored.metadata)


async def test_runtime_context_async() -> None:
    from threadloom.graph.runtime import Runtime

    async def anode(state: S, runtime: Runtime[Ctx]) -> dict:
        return {"log": [runtime.context.user]}

    g = StateGraph(S)
    g.add_node("anode", anode)
    g.add_edge(START, "anode")
    assert (await g.compile().ainvoke({"n": 0, "log": []}, context=Ctx("bo")))["log"] == ["bo"]


def test_joined_barrier_is_stored_per_checkpoint() -> None:
    g = StateGraph(S)
    for name in ("a", "b", "c", "d"):
        g.add_node(name, lambda s, name=name: {"log": [name]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("b", "c")
    g.add_edge(["a", "c"], "d")
    graph = g.compile(checkpointer=InMemorySaver())
    graph.invoke({"n": 0, "log": []}, CFG, durability="async")
    barrier = [
        t.checkpoint["channel_values"].get("join:a+c:d")
        for t in reversed(list(graph.checkpointer.list(CFG)))
    ]
    assert barrier[2] == {"a"}  # after step 1 (a, b ran): only a has arrived


def test_partial_and_callable_object_nodes() -> None:
    import functools

    from threadloom.graph.runtime import Runtime

    def tag(state: S, config: dict[str, Any], label: str) -> dict:
        return {"log": [f"{label}:{config['configurable']['thread_id']}"]}

    class Counter:
        def __call__(self, state: S, runtime: Runtime[Ctx]) -> dict:
            return {"n": len(state["log"]), "log": [runtime.context.user]}

    g = StateGraph(S)
    g.add_node("tag", functools.partial(tag, label="p"))
    g.add_node("count", Counter())
    g.add_edge(START, "tag")
    g.add_edge("tag", "count")
    out = g.compile(checkpointer=InMemorySaver()).invoke(
        {"n": 0, "log": []}, CFG, context=Ctx("cy")
    )
    assert out == {"n": 1, "log": ["p:t", "cy"]}


def test_non_dict_input_is_rejected() -> None:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"n": 1})
    g.add_edge(START, "a")
    with pytest.raises(InvalidUpdateError, match="graph input must be a dict"):
        g.compile().invoke(["not", "a", "dict"])


def test_schema_classes_revive_from_sqlite_in_a_new_saver(tmp_path) -> None:
    import sqlite3

    sqlite_mod = pytest.importorskip("threadloom.checkpoint.sqlite")

    def open_saver() -> Any:
        return sqlite_mod.SqliteSaver(sqlite3.connect(tmp_path / "s.db", check_same_thread=False))

    def build(saver: Any) -> Any:
        g = StateGraph(Cart)
        g.add_node("add", lambda c: {"items": [Item("tea")]})
        g.add_edge(START, "add")
        return g.compile(checkpointer=saver)

    build(open_saver()).invoke({"items": [Item("mug")]}, CFG)
    again = build(open_saver())  # e.g. the next process: compiling allowlists again
    assert again.get_state(CFG).values["items"] == [Item("mug"), Item("tea")]

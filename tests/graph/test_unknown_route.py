"""A route to a node the graph does not have fails the task that routed.

LangGraph logs "wrote to unknown channel branch:to:reveiw" (or "Ignoring unknown
node name") and drops the route: the run returns normally with the rest of its
work silently skipped (probe5). Here the routing task fails with
InvalidRouteError naming the source, the bad name and the graph's nodes; its
writes are not applied, so fixing the code and invoking again resumes there.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import InvalidRouteError
from threadloom.graph import END, START, StateGraph
from threadloom.types import Command, Send


class S(TypedDict):
    log: Annotated[list, operator.add]


def _graph(kind: str, target: str) -> Any:
    g = StateGraph(S)
    g.add_node("review", lambda s: {"log": ["review"]})
    if kind == "router":
        g.add_node("a", lambda s: {"log": ["a"]})
        g.add_conditional_edges("a", lambda s: target)
    elif kind == "goto":
        g.add_node("a", lambda s: Command(goto=target, update={"log": ["a"]}))
    elif kind == "send":
        g.add_node("a", lambda s: {"log": ["a"]})
        g.add_conditional_edges("a", lambda s: [Send(target, s)])
    elif kind == "goto_send":
        g.add_node("a", lambda s: Command(goto=Send(target, s), update={"log": ["a"]}))
    g.add_edge(START, "a")
    return g.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("kind", ["router", "goto", "send", "goto_send"])
def test_a_mistyped_node_name_fails_the_routing_task(kind: str) -> None:
    app = _graph(kind, "reveiw")
    cfg = {"configurable": {"thread_id": kind}}
    how = "sent a packet to" if "send" in kind else "routed to"
    with pytest.raises(InvalidRouteError, match=rf"node 'a' {how} 'reveiw'.*\['a', 'review'\]"):
        app.invoke({"log": []}, cfg)
    [task] = app.get_state(cfg).tasks
    assert task.name == "a" and isinstance(task.error, InvalidRouteError)


@pytest.mark.parametrize("kind", ["router", "goto", "send", "goto_send"])
async def test_the_async_run_fails_the_same_way(kind: str) -> None:
    app = _graph(kind, "reveiw")
    with pytest.raises(InvalidRouteError, match="'reveiw'"):
        await app.ainvoke({"log": []}, {"configurable": {"thread_id": kind}})


@pytest.mark.parametrize("kind", ["router", "goto", "send", "goto_send"])
def test_a_real_node_and_end_still_route(kind: str) -> None:
    out = _graph(kind, "review").invoke({"log": []}, {"configurable": {"thread_id": kind}})
    assert out == {"log": ["a", "review"]}
    if kind in ("router", "goto"):
        assert _graph(kind, END).invoke({"log": []}, {"configurable": {"thread_id": "e"}}) == {
            "log": ["a"]
        }


def test_a_parent_command_is_checked_against_the_parent() -> None:
    """``Command(graph=PARENT, goto=...)`` names a node of the calling graph."""

    def child_graph(target: str) -> Any:
        c = StateGraph(S)
        c.add_node("inner", lambda s: Command(graph=Command.PARENT, goto=target))
        c.add_edge(START, "inner")
        return c.compile()

    def parent(target: str) -> Any:
        p = StateGraph(S)
        p.add_node("child", child_graph(target))
        p.add_node("done", lambda s: {"log": ["done"]})
        p.add_edge(START, "child")
        return p.compile(checkpointer=InMemorySaver())

    assert parent("done").invoke({"log": []}, {"configurable": {"thread_id": "p1"}}) == {
        "log": ["done"]
    }
    with pytest.raises(InvalidRouteError, match=r"node 'child' routed to 'dnoe'"):
        parent("dnoe").invoke({"log": []}, {"configurable": {"thread_id": "p2"}})


def test_a_node_added_to_the_builder_after_compile_is_not_a_target() -> None:
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "late")
    app = g.compile()
    g.add_node("late", lambda s: {"log": ["late"]})  # the compiled graph does not have it
    with pytest.raises(InvalidRouteError, match="routed to 'late'"):
        app.invoke({"log": []})


def test_a_str_enum_member_routes_to_the_node_it_equals() -> None:
    """``"branch:to:{}".format(N.B)`` is ``branch:to:N.B`` on Python 3.11+: the
    route went nowhere (LangGraph drops it too)."""
    import enum

    class N(str, enum.Enum):
        B = "b"

    def build(kind: str) -> Any:
        g = StateGraph(S)
        g.add_node("b", lambda s: {"log": ["b"]})
        if kind == "router":
            g.add_node("a", lambda s: {"log": ["a"]})
            g.add_conditional_edges("a", lambda s: N.B)
        elif kind == "goto":
            g.add_node("a", lambda s: Command(goto=N.B, update={"log": ["a"]}))
        else:
            g.add_node("a", lambda s: {"log": ["a"]})
            g.add_conditional_edges("a", lambda s: [Send(N.B, s)])
        g.add_edge(START, "a")
        return g.compile()

    for kind in ("router", "goto", "send"):
        assert build(kind).invoke({"log": []}) == {"log": ["a", "b"]}, kind

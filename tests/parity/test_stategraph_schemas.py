"""Parity: state schema kinds, messages, input/output schemas, defer, interrupts, PARENT.

Same method as test_stategraph_core.py (same scenario on both libraries, observations
compared after id normalisation).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from tests.parity import helpers as h
from tests.parity import test_stategraph_core as core

CFG = core.CFG
stored, updates = core.stored, core.updates


def extra(lib: Any, name: str) -> Any:
    """A public name helpers.py does not carry (``MessagesState``, ``Overwrite``)."""
    import importlib

    for module in ("graph", "types"):
        mod = importlib.import_module(f"{lib.name}.{module}")
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(name)


@dataclass
class DState:
    log: Annotated[list[str], operator.add] = field(default_factory=list)
    n: int = 0


class PState(BaseModel):
    log: Annotated[list[str], operator.add] = []
    n: int = 0


def sc_dataclass_state(lib, saver, durability):
    def inc(state: DState) -> dict:
        return {"n": state.n + 1, "log": [f"n={state.n}"]}

    def more(state: DState) -> str:
        return "inc" if state.n < 2 else lib.END

    b = lib.StateGraph(DState)
    b.add_node("inc", inc)
    b.add_edge(lib.START, "inc")
    b.add_conditional_edges("inc", more)
    g = b.compile(checkpointer=saver)
    return [
        ("invoke", g.invoke({"log": ["in"]}, CFG, **h.kw(durability))),
        ("stored", stored(saver)),
    ]


def sc_pydantic_state(lib, saver, durability):
    b = lib.StateGraph(PState)
    b.add_node("a", lambda s: {"log": [f"a{s.n}"], "n": s.n + 5})
    b.add_node("b", lambda s: PState(log=["b"]))
    b.add_edge(lib.START, "a")
    b.add_edge("a", "b")
    g = b.compile(checkpointer=saver)
    return [
        ("updates", updates(g, {"n": 1}, CFG, **h.kw(durability))),
        ("state", g.get_state(CFG).values),
        ("stored", stored(saver)),
    ]


def sc_messages(lib, saver, durability):
    msgs = pytest.importorskip("langchain_core.messages")

    def bot(state) -> dict:
        last = state["messages"][-1]
        return {"messages": [msgs.AIMessage(f"echo {last.content}", id=f"ai-{last.id}")]}

    def edit(state) -> dict:
        first = state["messages"][0]
        return {
            "messages": [
                msgs.HumanMessage("edited", id=first.id),
                msgs.RemoveMessage(id=state["messages"][-1].id),
            ]
        }

    b = lib.StateGraph(extra(lib, "MessagesState"))
    b.add_node("bot", bot)
    b.add_node("edit", edit)
    b.add_edge(lib.START, "bot")
    b.add_edge("bot", "edit")
    g = b.compile(checkpointer=saver)
    obs = [
        ("t1", g.invoke({"messages": [msgs.HumanMessage("hi", id="h1")]}, CFG, **h.kw(durability)))
    ]
    obs.append(
        (
            "t2",
            g.invoke({"messages": [msgs.HumanMessage("more", id="h2")]}, CFG, **h.kw(durability)),
        )
    )
    obs.append(("stored", stored(saver)))
    return obs


def sc_io_schemas(lib, saver, durability):
    class In(TypedDict):
        question: str

    class Out(TypedDict):
        answer: str

    class Full(TypedDict):
        question: str
        answer: str
        scratch: Annotated[list[str], operator.add]

    class Private(TypedDict):
        question: str
        secret: str

    def think(state: Private) -> dict:
        return {"scratch": [f"thinking about {state['question']}"], "secret": "42"}

    def answer(state: Full) -> dict:
        return {"answer": f"{len(state['scratch'])} thoughts"}

    b = lib.StateGraph(Full, input_schema=In, output_schema=Out)
    b.add_node("think", think, input_schema=Private)
    b.add_node("answer", answer)
    b.add_edge(lib.START, "think")
    b.add_edge("think", "answer")
    g = b.compile(checkpointer=saver)
    return [
        ("invoke", g.invoke({"question": "why", "ignored": 1}, CFG, **h.kw(durability))),
        ("state", g.get_state(CFG).values),
        ("stored", stored(saver)),
    ]


def sc_overwrite_and_defer(lib, saver, durability):
    b = lib.StateGraph(core.State)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("b1", lambda s: {"log": ["b1"]})
    b.add_node("b2", lambda s: {"log": ["b2"]})
    b.add_node(
        "last", lambda s: {"log": extra(lib, "Overwrite")([f"{len(s['log'])} before"])}, defer=True
    )
    b.add_edge(lib.START, "a")
    b.add_edge(lib.START, "b1")
    b.add_edge("b1", "b2")
    b.add_edge("a", "last")
    b.add_edge("b2", "last")
    g = b.compile(checkpointer=saver)
    return [
        ("invoke", g.invoke({"log": ["in"]}, CFG, **h.kw(durability))),
        ("stored", core.without_barriers(stored(saver))),
    ]


def sc_static_interrupts(lib, saver, durability):
    b = lib.StateGraph(core.State)
    for name in ("a", "b", "c"):
        b.add_node(name, core.node(name))
    b.add_edge(lib.START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", "c")
    g = b.compile(checkpointer=saver, interrupt_before=["b"], interrupt_after=["c"])
    obs = [("run", updates(g, {"log": []}, CFG, **h.kw(durability)))]
    obs.append(("at b", g.get_state(CFG)))
    obs.append(("resume", updates(g, None, CFG, **h.kw(durability))))
    obs.append(("after c", g.get_state(CFG).next))
    obs.append(("finish", updates(g, None, CFG, **h.kw(durability))))
    obs.append(("stored", stored(saver)))
    return obs


def sc_parent_command(lib, saver, durability):
    class Sub(TypedDict):
        log: Annotated[list[str], operator.add]

    def escalate(state: Sub):
        return lib.Command(graph=lib.Command.PARENT, goto="human", update={"log": ["escalated"]})

    sb = lib.StateGraph(Sub)
    sb.add_node("escalate", escalate)
    sb.add_edge(lib.START, "escalate")
    b = lib.StateGraph(core.State)
    b.add_node("sub", sb.compile(), destinations=("human",))
    b.add_node("human", core.node("human"))
    b.add_edge(lib.START, "sub")
    g = b.compile(checkpointer=saver)
    return [
        ("invoke", g.invoke({"log": []}, CFG, **h.kw(durability))),
        ("stored", stored(saver)),
    ]


def sc_send_then_branch(lib, saver, durability):
    """A branch after a Send task routes on the graph state plus the task's own writes."""

    def fan(state) -> list:
        return [lib.Send("work", {"log": ["arg"], "n": 100})]

    def work(state) -> dict:
        return {"log": ["work"]}

    def after(state) -> str:
        return "done" if len(state["log"]) >= 3 else lib.END

    b = lib.StateGraph(core.State)
    b.add_node("plan", core.node("plan"))
    b.add_node("work", work)
    b.add_node("done", lambda s: {"log": [f"done n={s['n']} len={len(s['log'])}"]})
    b.add_edge(lib.START, "plan")
    b.add_conditional_edges("plan", fan, ["work"])
    b.add_conditional_edges("work", after, ["done", lib.END])
    g = b.compile(checkpointer=saver)
    return [("invoke", g.invoke({"log": ["in"], "n": 1}, CFG, **h.kw(durability)))]


def sc_invalid_updates(lib, saver, durability):
    b = lib.StateGraph(core.State)
    b.add_node("a", lambda s: {"n": 1})
    b.add_node("b", lambda s: {"n": 2})
    b.add_edge(lib.START, "a")
    b.add_edge(lib.START, "b")
    g = b.compile(checkpointer=saver)
    return [("conflict", h.raises(lambda: g.invoke({"log": []}, CFG), lib))]


SCENARIOS = [
    sc_dataclass_state,
    sc_pydantic_state,
    sc_messages,
    sc_io_schemas,
    sc_overwrite_and_defer,
    sc_static_interrupts,
    sc_parent_command,
    sc_send_then_branch,
    sc_invalid_updates,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__[3:])
def test_stategraph_schema_parity(scenario) -> None:
    h.run_parity(scenario)

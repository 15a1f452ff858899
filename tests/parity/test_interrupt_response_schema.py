"""``interrupt(value, response_schema=...)`` side by side with LangGraph.

A ported program that passes ``response_schema`` used to fail with a TypeError.
Now, as in LangGraph 1.2: the interrupt surfaces the schema as JSON Schema, a
typed schema validates the answer and ``interrupt`` returns the validated
object, a wrong answer raises ``pydantic.ValidationError`` tagged for
``errors.is_invalid_resume`` and leaves the interrupt open, and a stored
interrupt keeps its schema across a reload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from typing_extensions import TypedDict

pydantic = pytest.importorskip("pydantic")

import langgraph.checkpoint.memory as lg_memory  # noqa: E402
import langgraph.errors as lg_errors  # noqa: E402
import langgraph.graph as lg_graph  # noqa: E402
import langgraph.types as lg_types  # noqa: E402

import threadloom.checkpoint.memory as tl_memory  # noqa: E402
import threadloom.errors as tl_errors  # noqa: E402
import threadloom.graph as tl_graph  # noqa: E402
import threadloom.types as tl_types  # noqa: E402
from threadloom.checkpoint.serde import MsgpackSerializer  # noqa: E402
from threadloom.checkpoint.sqlite import SqliteSaver  # noqa: E402

SIDES = {
    "langgraph": (lg_graph, lg_types, lg_memory, lg_errors),
    "threadloom": (tl_graph, tl_types, tl_memory, tl_errors),
}
CFG = {"configurable": {"thread_id": "t"}}


class Decision(pydantic.BaseModel):
    ok: bool
    note: str = ""


@dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


class State(TypedDict):
    log: list


def build(side: str, schema: Any, saver: Any = None) -> Any:
    graph_mod, types_mod, memory_mod, _ = SIDES[side]

    def ask(state: State) -> dict:
        answer = types_mod.interrupt("answer?", response_schema=schema)
        return {"log": [*state["log"], repr(answer)]}

    b = graph_mod.StateGraph(State)
    b.add_node("ask", ask)
    b.add_edge(graph_mod.START, "ask")
    b.add_edge("ask", graph_mod.END)
    return b.compile(checkpointer=saver or memory_mod.InMemorySaver())


def first_interrupt(result: dict) -> Any:
    (intr,) = result["__interrupt__"]
    return intr


@pytest.mark.parametrize(
    "schema, answer",
    [
        (Decision, {"ok": True, "note": "fine"}),
        (Point, {"x": 1, "y": "2"}),
        (Pair, {"left": "a", "right": "b"}),
        ({"type": "object", "title": "free"}, {"anything": [1, 2]}),
        (None, "plain"),
    ],
)
def test_schema_surfaced_and_answer_returned_as_langgraph(schema: Any, answer: Any) -> None:
    seen = {}
    for side in SIDES:
        types_mod = SIDES[side][1]
        graph = build(side, schema)
        intr = first_interrupt(graph.invoke({"log": []}, CFG))
        done = graph.invoke(types_mod.Command(resume=answer), CFG)
        seen[side] = (intr.value, intr.response_schema, done["log"])
    assert seen["threadloom"] == seen["langgraph"]
    if schema in (Decision, Point):  # validated: the node got the typed object
        assert seen["threadloom"][2][0].startswith(schema.__name__)
    if isinstance(schema, type):
        assert isinstance(seen["threadloom"][1], dict)  # JSON Schema for clients


def test_wrong_answer_leaves_the_interrupt_open() -> None:
    outcomes = {}
    for side in SIDES:
        _, types_mod, _, errors_mod = SIDES[side]
        graph = build(side, Decision)
        graph.invoke({"log": []}, CFG)
        with pytest.raises(pydantic.ValidationError) as info:
            graph.invoke(types_mod.Command(resume={"ok": "not a bool"}), CFG)
        assert errors_mod.is_invalid_resume(info.value)
        state = graph.get_state(CFG)
        assert state.next == ("ask",)
        (intr,) = state.interrupts
        done = graph.invoke(types_mod.Command(resume={"ok": False}), CFG)
        outcomes[side] = (
            intr.response_schema,
            done["log"],
            len(list(graph.get_state_history(CFG))),
        )
    assert outcomes["threadloom"] == outcomes["langgraph"]


def test_is_invalid_resume_reads_both_tags() -> None:
    assert not tl_errors.is_invalid_resume(ValueError("x"))
    mine, theirs = ValueError("a"), ValueError("b")
    tl_errors.mark_invalid_resume(mine)
    lg_errors._mark_invalid_resume(theirs)
    assert tl_errors.is_invalid_resume(mine) and tl_errors.is_invalid_resume(theirs)


def test_schema_survives_a_reload(tmp_path: Any) -> None:
    path = str(tmp_path / "s.db")
    with SqliteSaver.from_conn_string(path) as saver:
        graph = build("threadloom", Decision, saver)
        asked = first_interrupt(graph.invoke({"log": []}, CFG))
    with SqliteSaver.from_conn_string(path) as saver:
        graph = build("threadloom", Decision, saver)
        (again,) = graph.get_state(CFG).interrupts
        assert again == asked and again.response_schema == asked.response_schema
        done = graph.invoke(tl_types.Command(resume={"ok": True}), CFG)
    assert done["log"] == ["Decision(ok=True, note='')"]


def test_interrupt_bytes_without_schema_unchanged() -> None:
    serde = MsgpackSerializer()
    plain = tl_types.Interrupt(value="v", id="i")
    typed = tl_types.Interrupt(value="v", id="i", response_schema={"type": "string"})
    kind, data = serde.dumps_typed(plain)
    assert b"response_schema" not in data  # older readers see what they always saw
    assert serde.loads_typed((kind, data)) == plain
    assert serde.loads_typed(serde.dumps_typed(typed)) == typed
    assert plain != typed
    assert repr(typed) == "Interrupt(value='v', id='i', response_schema={'type': 'string'})"


def test_langgraph_stored_interrupt_keeps_its_schema() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    lg = lg_types.Interrupt(value="v", id="i", response_schema={"type": "string"})
    decoded = MsgpackSerializer().loads_typed(JsonPlusSerializer().dumps_typed(lg))
    assert decoded == tl_types.Interrupt(value="v", id="i", response_schema={"type": "string"})


def test_small_api_names_match_langgraph() -> None:
    for side in SIDES:
        types_mod = SIDES[side][1]
        ow = types_mod.Overwrite([1])
        assert ow.type == "__overwrite__"
        assert repr(ow) == "Overwrite(value=[1], type='__overwrite__')"
        intr = types_mod.Interrupt.from_ns("v", "node:1", response_schema={"type": "string"})
        assert intr.response_schema == {"type": "string"}
        with pytest.warns(DeprecationWarning):
            assert intr.interrupt_id == intr.id

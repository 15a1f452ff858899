"""A mistyped stream mode or interrupt node is refused before the run starts.

LangGraph streams nothing for ``stream_mode="update"`` (``invoke`` returns
``[]``) and ignores ``interrupt_before=["revew"]`` at invoke (compile checks it):
the run then does something else than asked, silently (probe5).
"""

from __future__ import annotations

from typing import TypedDict

import pytest

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.errors import ConfigError
from threadloom.graph import START, StateGraph


class S(TypedDict):
    x: int


CFG = {"configurable": {"thread_id": "kw"}}


def _app():
    g = StateGraph(S)
    g.add_node("review", lambda s: {"x": s["x"] + 1})
    g.add_edge(START, "review")
    return g.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stream_mode": "update"}, "stream_mode 'update' is not a stream mode"),
        ({"stream_mode": ["values", "message"]}, "stream_mode 'message' is not"),
        ({"print_mode": "value"}, "print_mode 'value' is not"),
        ({"interrupt_before": ["revew"]}, r"interrupt_before names 'revew'.*\['review'\]"),
        ({"interrupt_after": "revew"}, "interrupt_after names 'revew'"),
        ({"interrupt_before": ["*"]}, r"interrupt_before=\['\*'\] names no node; .*='\*'"),
    ],
)
def test_a_typo_is_refused_before_anything_runs(kwargs, match) -> None:
    app = _app()
    with pytest.raises(ConfigError, match=match):
        app.invoke({"x": 0}, CFG, **kwargs)
    with pytest.raises(ConfigError, match=match):
        list(app.stream({"x": 0}, CFG, **kwargs))
    assert app.get_state(CFG).values == {}  # nothing ran, nothing saved


async def test_the_async_twins_refuse_it_too() -> None:
    app = _app()
    with pytest.raises(ConfigError, match="stream_mode 'update'"):
        await app.ainvoke({"x": 0}, CFG, stream_mode="update")
    with pytest.raises(ConfigError, match="interrupt_before names 'revew'"):
        async for _ in app.astream({"x": 0}, CFG, interrupt_before=["revew"]):
            pass


def test_valid_modes_and_nodes_still_run() -> None:
    app = _app()
    assert app.invoke({"x": 0}, CFG, stream_mode=["updates", "values"]) == [
        ("values", {"x": 0}),
        ("updates", {"review": {"x": 1}}),
        ("values", {"x": 1}),
    ]
    out = app.invoke({"x": 5}, {"configurable": {"thread_id": "kw2"}}, interrupt_before=["review"])
    assert out == {"x": 5}
    assert app.get_state({"configurable": {"thread_id": "kw2"}}).next == ("review",)
    assert app.invoke({"x": 0}, {"configurable": {"thread_id": "kw3"}}, interrupt_after="*") == {
        "x": 1
    }

"""batch / batch_as_completed / abatch / abatch_as_completed, aget_graph and
aget_subgraphs: the Runnable-style helpers a ported program calls, checked
against LangGraph's results."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from typing_extensions import TypedDict


class State(TypedDict):
    x: int


def _app(lib: str) -> Any:
    graph = importlib.import_module(f"{lib}.graph")

    def double(state: State) -> dict:
        if state["x"] < 0:
            raise ValueError(f"negative {state['x']}")
        return {"x": state["x"] * 2}

    builder = graph.StateGraph(State).add_node("double", double)
    return builder.add_edge(graph.START, "double").compile()


INPUTS = [{"x": 1}, {"x": -1}, {"x": 3}]


def _plain(results: list[Any]) -> list[Any]:
    return [repr(r) if isinstance(r, Exception) else r for r in results]


@pytest.mark.parametrize("lib", ["langgraph", "threadloom"])
async def test_batches_match(lib: str) -> None:
    app = _app(lib)
    ordered = _plain(app.batch(INPUTS, return_exceptions=True))
    assert ordered == [{"x": 2}, "ValueError('negative -1')", {"x": 6}]
    done = sorted((i, repr(r)) for i, r in app.batch_as_completed(INPUTS, return_exceptions=True))
    assert done == [(0, "{'x': 2}"), (1, "ValueError('negative -1')"), (2, "{'x': 6}")]
    assert _plain(await app.abatch(INPUTS, return_exceptions=True)) == ordered
    adone = sorted(
        [(i, repr(r)) async for i, r in app.abatch_as_completed(INPUTS, return_exceptions=True)]
    )
    assert adone == done
    with pytest.raises(ValueError, match="negative"):
        list(app.batch_as_completed(INPUTS))


async def test_async_introspection_matches_sync() -> None:
    app = _app("threadloom")
    assert (await app.aget_graph()).to_json() == app.get_graph().to_json()
    assert [n async for n, _ in app.aget_subgraphs()] == [n for n, _ in app.get_subgraphs()]


def test_config_list_must_match_inputs() -> None:
    with pytest.raises(ValueError, match="2 configs for 3 inputs"):
        _app("threadloom").batch(INPUTS, [{}, {}])

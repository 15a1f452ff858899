"""A routing function's bad answer raises what LangGraph raises, so ported
``except ValueError`` / ``except KeyError`` clauses keep working (parity2 probe:
threadloom raised only InvalidUpdateError, which is neither)."""

from __future__ import annotations

from typing import Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h


class S(TypedDict):
    n: int


def _app(lib: Any, route: Any, path_map: Any) -> Any:
    g = lib.StateGraph(S)
    g.add_node("a", lambda s: {"n": 1})
    g.add_node("b", lambda s: {"n": 2})
    g.add_edge(lib.START, "a")
    g.add_conditional_edges("a", route, path_map)
    return g.compile()


@pytest.mark.parametrize(
    "route, path_map, caught",
    [
        (lambda s: None, None, ValueError),
        (lambda s: "zz", {"x": "b"}, KeyError),
    ],
    ids=["none", "missing-key"],
)
@pytest.mark.parametrize("name", h.LIBS)
def test_route_errors_caught_as_in_langgraph(
    name: str, route: Any, path_map: Any, caught: type
) -> None:
    lib = h._lib(name)
    with pytest.raises(caught) as info:
        _app(lib, route, path_map).invoke({"n": 0})
    if name == "threadloom":
        assert isinstance(info.value, lib.InvalidUpdateError)  # as before, too
        assert "node 'a'" in str(info.value) and not str(info.value).startswith('"')

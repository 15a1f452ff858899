"""LangGraph's older StateGraph keywords (``input=``, ``output=``,
``config_schema=``) still work there with a deprecation warning; a ported
program using them raised TypeError here (compatibility.md listed it)."""

from __future__ import annotations

import warnings

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h


class State(TypedDict):
    a: int
    b: int


class In(TypedDict):
    a: int


class Out(TypedDict):
    b: int


class Ctx(TypedDict):
    user: str


@pytest.mark.parametrize("name", h.LIBS)
def test_old_keywords_warn_and_work(name: str) -> None:
    lib = h._lib(name)
    with pytest.warns(DeprecationWarning):
        g = lib.StateGraph(State, input=In, output=Out, config_schema=Ctx)
    g.add_node("n", lambda s: {"b": s["a"] + 1})
    g.add_edge(lib.START, "n")
    assert g.compile().invoke({"a": 1}) == {"b": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert lib.StateGraph(State, input=In, input_schema=State).input_schema is State


def test_unknown_keyword_is_a_type_error() -> None:
    lib = h._lib("threadloom")
    with pytest.raises(TypeError, match="bogus"):
        lib.StateGraph(State, bogus=1)

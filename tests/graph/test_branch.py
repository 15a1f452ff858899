"""Routing values -> destinations, and which extras a routing function asks for."""

from __future__ import annotations

import functools
from typing import Any, Literal

import pytest

from threadloom.constants import END, START
from threadloom.errors import InvalidUpdateError
from threadloom.graph.branch import BranchSpec, ends_from_literal, injected_params
from threadloom.types import Command, Send


def test_path_map_and_lists() -> None:
    spec = BranchSpec.from_path(lambda s: s, {True: "yes", False: END})
    assert spec.destinations(True, "src") == ["yes"]
    assert spec.destinations([True, False], "src") == ["yes", END]
    assert BranchSpec.from_path(lambda s: s, ["a", "b"]).ends == {"a": "a", "b": "b"}


def test_sends_pass_through() -> None:
    spec = BranchSpec.from_path(lambda s: s, None)
    sends = [Send("w", 1), Send("w", 2)]
    assert spec.destinations(sends, "src") == sends


@pytest.mark.parametrize("bad", [None, START])
def test_invalid_destinations(bad: Any) -> None:
    with pytest.raises(InvalidUpdateError, match="branch from node 'src' did not return a valid"):
        BranchSpec.from_path(lambda s: s, None).destinations(bad, "src")


def test_unknown_path_map_key_and_send_to_end() -> None:
    spec = BranchSpec.from_path(lambda s: s, {"x": "a"})
    with pytest.raises(InvalidUpdateError, match="returned 'y', which is not a key"):
        spec.destinations("y", "src")
    with pytest.raises(InvalidUpdateError, match="sent a packet to END"):
        spec.destinations(Send(END, {}), "src")


def test_literal_hints_give_ends() -> None:
    def route(state: dict) -> Literal["a", "b"]:
        return "a"

    def node(state: dict) -> Command[Literal["c"]]:
        return Command(goto="c")

    assert ends_from_literal(route) == ("a", "b")
    assert ends_from_literal(node) == ("c",)
    assert ends_from_literal(lambda s: s) is None


def test_injected_params_for_every_callable_kind() -> None:
    def f(state: Any, config: Any, label: str = "") -> None: ...

    class Obj:
        def __call__(self, state: Any, runtime: Any, store: Any) -> None: ...

    assert injected_params(f) == {"config"}
    assert injected_params(functools.partial(f, label="x")) == {"config"}
    assert injected_params(Obj()) == {"runtime", "store"}
    assert injected_params(len) == frozenset()

"""The pure pieces of history.py: config preparation, routing, as_node inference,
checkpoint_map patching, superstep validation."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from threadloom.errors import ConfigError, InvalidUpdateError
from threadloom.pregel.snapshot import (
    find_subgraph,
    patch_checkpoint_map,
    prepare_config,
    route,
    subgraph_of,
)
from threadloom.pregel.update import infer_as_node, validate_supersteps
from threadloom.types import StateUpdate


def node(*subgraphs: Any) -> SimpleNamespace:
    return SimpleNamespace(subgraphs=list(subgraphs), triggers=[])


def graph(checkpointer: Any = None, input_channels: Any = "__start__", **nodes: Any) -> Any:
    return SimpleNamespace(
        nodes=nodes, checkpointer=checkpointer, input_channels=input_channels, config=None
    )


INNER = graph(a=node())
MIDDLE = graph(inner=node(INNER), m=node())
ROOT = graph(middle=node(MIDDLE), p=node(), off=node(graph(checkpointer=False, x=node())))


def test_find_subgraph_walks_recast_namespaces() -> None:
    assert find_subgraph(ROOT, "middle") is MIDDLE
    assert find_subgraph(ROOT, "middle|inner") is INNER
    assert find_subgraph(ROOT, "p") is None
    assert find_subgraph(ROOT, "nope|inner") is None
    assert find_subgraph(ROOT, "off") is None  # checkpointer=False keeps no state
    assert subgraph_of(ROOT.nodes["off"]) is None


def test_route_strips_task_ids_and_rejects_unknown_namespace_for_updates() -> None:
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": "middle:abc|inner:def"}}
    assert route(ROOT, cfg) is INNER
    assert route(ROOT, {"configurable": {"thread_id": "t"}}) is ROOT
    ghost = {"configurable": {"thread_id": "t", "checkpoint_ns": "ghost:1"}}
    assert route(ROOT, ghost) is ROOT  # reads fall back to this graph, as LangGraph
    with pytest.raises(ConfigError, match="ghost") as info:
        route(ROOT, ghost, for_update=True)
    assert "middle" in str(info.value)


def test_prepare_config() -> None:
    cfg = prepare_config(ROOT, {"configurable": {"thread_id": 7}})
    assert cfg == {"configurable": {"thread_id": "7", "checkpoint_ns": ""}}
    assert prepare_config(ROOT, {"configurable": {"thread_id": 7}}, with_ns=False) == {
        "configurable": {"thread_id": "7"}
    }
    own = graph(checkpointer=True)
    cfg = prepare_config(own, {"configurable": {"thread_id": "t", "checkpoint_ns": "p:1|c:2|3"}})
    assert cfg["configurable"]["checkpoint_ns"] == "p|c|3"
    with pytest.raises(ConfigError, match="thread_id"):
        prepare_config(ROOT, {"configurable": {}})


def test_patch_checkpoint_map() -> None:
    root = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "r1"}}
    assert patch_checkpoint_map(root, {"parents": {}}) is root
    assert patch_checkpoint_map(None, {"parents": {"": "r"}}) is None
    child = {"configurable": {"thread_id": "t", "checkpoint_ns": "c:1", "checkpoint_id": "c1"}}
    patched = patch_checkpoint_map(child, {"parents": {"": "r1"}})
    assert patched["configurable"]["checkpoint_map"] == {"": "r1", "c:1": "c1"}
    assert "checkpoint_map" not in child["configurable"]  # not mutated


def test_infer_as_node() -> None:
    two = graph(a=node(), b=node())
    assert infer_as_node(graph(only=node()), {}) == "only"
    assert infer_as_node(two, {"__input__": {}}) is None
    assert infer_as_node(graph(input_channels="a", a=node(), b=node()), {}) == "a"
    assert infer_as_node(two, {"a": {"x": "1"}, "b": {"x": "2"}}) == "b"
    assert infer_as_node(two, {"a": {"x": "2"}, "b": {"x": "2"}}) is None  # ran together
    assert infer_as_node(two, {"a": {"x": "1"}, "zz": {"x": "9"}}) == "a"  # not a node


def test_validate_supersteps() -> None:
    two = graph(a=node(), b=node())
    with pytest.raises(ValueError, match="at least one"):
        validate_supersteps(two, [])
    with pytest.raises(ValueError, match="superstep 1"):
        validate_supersteps(two, [[StateUpdate({}, "a")], []])
    with pytest.raises(InvalidUpdateError, match="as_node"):
        validate_supersteps(two, [[StateUpdate({}), StateUpdate({}, "a")]])
    with pytest.raises(InvalidUpdateError, match="'c'"):
        validate_supersteps(two, [[StateUpdate({}, "c")]])
    steps = validate_supersteps(two, [[({"v": 1}, "a")], [StateUpdate(None, "__copy__")]])
    assert steps == [[StateUpdate({"v": 1}, "a")], [StateUpdate(None, "__copy__")]]

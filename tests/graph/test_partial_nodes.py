"""``functools.partial`` of an async function is an async node (as in LangGraph,
whose ``inspect.iscoroutinefunction`` looks through partials): it was called as
a sync function, so its coroutine came back as the node's update
(InvalidUpdateError), and a timeout on it was refused as on a sync node."""

from __future__ import annotations

import functools

import pytest
from typing_extensions import TypedDict

from threadloom.errors import InvalidGraphError, NodeError
from threadloom.graph import START, StateGraph
from threadloom.pregel.node import call_style


class State(TypedDict):
    n: int


async def _add(state: State, k: int = 1) -> dict:
    return {"n": state["n"] + k}


def _add_sync(state: State, k: int = 1) -> dict:
    return {"n": state["n"] + k}


class _AsyncCall:
    async def __call__(self, state: State) -> dict:
        return {"n": state["n"] + 1}


def _graph(node: object, **kw: object) -> object:
    return StateGraph(State).add_node("s", node, **kw).add_edge(START, "s").compile()


@pytest.mark.parametrize("kw", [{}, {"timeout": 5}])
async def test_a_partial_of_an_async_function_runs_as_async(kw: dict) -> None:
    assert await _graph(functools.partial(_add, k=2), **kw).ainvoke({"n": 1}) == {"n": 3}


async def test_a_nested_partial_and_an_async_callable_object_are_async() -> None:
    nested = functools.partial(functools.partial(_add, k=2), k=5)
    assert await _graph(nested, timeout=5).ainvoke({"n": 1}) == {"n": 6}
    assert await _graph(_AsyncCall(), timeout=5).ainvoke({"n": 1}) == {"n": 2}


async def _add_cfg(state: State, config: dict, k: int = 1) -> dict:
    assert "configurable" in config
    return {"n": state["n"] + k}


async def _add_rt(state: State, runtime: object, k: int = 1) -> dict:
    assert runtime is not None
    return {"n": state["n"] + k}


@pytest.mark.parametrize("fn", [_add_cfg, _add_rt])
@pytest.mark.parametrize("kw", [{}, {"timeout": 5}])
async def test_a_partial_asking_for_config_or_runtime_stays_async(fn, kw: dict) -> None:
    """The runtime wrapper of a node that takes config/runtime looked at
    ``partial.__call__`` (sync) and returned the coroutine as the update."""
    assert await _graph(functools.partial(fn, k=2), **kw).ainvoke({"n": 1}) == {"n": 3}


def test_a_partial_of_a_sync_function_stays_sync() -> None:
    assert call_style(functools.partial(_add_sync, k=2))[0] is False
    assert _graph(functools.partial(_add_sync, k=2)).invoke({"n": 1}) == {"n": 3}
    with pytest.raises(InvalidGraphError, match="'s' is sync"):
        _graph(functools.partial(_add_sync, k=2), timeout=5)


async def test_a_partial_error_handler_of_an_async_function_is_awaited() -> None:
    async def handle(state: State, error: NodeError, k: int = 1) -> dict:
        return {"n": state["n"] + k}

    async def boom(state: State) -> dict:
        raise ValueError("down")

    graph = StateGraph(State).add_node("s", boom, error_handler=functools.partial(handle, k=5))
    assert await graph.add_edge(START, "s").compile().ainvoke({"n": 1}) == {"n": 6}

"""``runtime.execution_info``: where the node runs and which attempt this is, as
LangGraph 1.2 gives it (nodes use it for retry-aware code and idempotency keys)."""

from __future__ import annotations

import time
from typing import TypedDict

from threadloom.checkpoint.memory import InMemorySaver
from threadloom.graph import START, StateGraph
from threadloom.runtime import ExecutionInfo, Runtime, get_runtime
from threadloom.types import RetryPolicy


class S(TypedDict, total=False):
    n: int


def _graph(seen: list[ExecutionInfo], fail_times: int, checkpointer=None):
    def node(state: S, runtime: Runtime) -> dict:
        seen.append(runtime.execution_info)
        if len(seen) <= fail_times:
            raise ConnectionError("transient")
        return {"n": state.get("n", 0) + 1}

    g = StateGraph(S)
    policy = RetryPolicy(max_attempts=4, initial_interval=0.001, jitter=False)
    g.add_node("work", node, retry_policy=policy)
    g.add_edge(START, "work")
    return g.compile(checkpointer=checkpointer)


def test_attempts_count_from_one_and_keep_the_first_start_time() -> None:
    seen: list[ExecutionInfo] = []
    before = time.time()
    app = _graph(seen, fail_times=2, checkpointer=InMemorySaver())
    conf = {"configurable": {"thread_id": "t-1"}, "run_id": "8c0e1f1e-0000-4000-8000-000000000001"}
    assert app.invoke({"n": 0}, conf) == {"n": 1}
    assert [i.node_attempt for i in seen] == [1, 2, 3]
    assert len({i.node_first_attempt_time for i in seen}) == 1
    assert before <= seen[0].node_first_attempt_time <= time.time()
    assert {i.task_id for i in seen} == {seen[0].task_id}  # same task, retried
    info = seen[-1]
    assert info.thread_id == "t-1"
    assert info.run_id == "8c0e1f1e-0000-4000-8000-000000000001"
    assert info.checkpoint_ns == f"work:{info.task_id}"  # the task's own namespace
    # the checkpoint the step started from: the one saved before the node ran
    history = list(app.get_state_history({"configurable": {"thread_id": "t-1"}}))
    assert info.checkpoint_id == history[1].config["configurable"]["checkpoint_id"]
    assert info.patch(node_attempt=9).node_attempt == 9 and info.node_attempt == 3


def test_without_a_checkpointer_thread_id_is_none() -> None:
    seen: list[ExecutionInfo] = []
    assert _graph(seen, fail_times=0).invoke({"n": 0}) == {"n": 1}
    assert seen[0].thread_id is None and seen[0].run_id is None
    assert seen[0].node_attempt == 1 and seen[0].task_id


def test_get_runtime_inside_a_helper_and_in_a_subgraph() -> None:
    got: list[ExecutionInfo] = []

    def helper() -> None:
        got.append(get_runtime().execution_info)

    def inner(state: S) -> dict:
        helper()
        return {"n": 1}

    sub = StateGraph(S)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    g = StateGraph(S)
    g.add_node("sub", sub.compile())
    g.add_edge(START, "sub")
    app = g.compile(checkpointer=InMemorySaver())
    app.invoke({"n": 0}, {"configurable": {"thread_id": "t-2"}})
    assert got[0].checkpoint_ns.startswith("sub:") and "|inner:" in got[0].checkpoint_ns
    assert got[0].thread_id == "t-2"


async def test_the_async_runner_counts_attempts_too() -> None:
    seen: list[ExecutionInfo] = []
    app = _graph(seen, fail_times=1, checkpointer=InMemorySaver())
    assert await app.ainvoke({"n": 0}, {"configurable": {"thread_id": "t-3"}}) == {"n": 1}
    assert [i.node_attempt for i in seen] == [1, 2]

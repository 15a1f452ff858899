"""Parity: an error handler's task id, namespace and interrupt ids are LangGraph's
(and where its timeout deliberately differs).

LangGraph nests a handler under the namespace of the task that failed
(``bad:<failed id>|__error_handler__bad:<handler id>``) and derives the handler's
task id from it; interrupt ids follow from the task's namespace. A thread
paused in a handler's ``interrupt()`` must resume by interrupt id after
``import_langgraph``, so these ids must be equal, not merely alike.
"""

from __future__ import annotations

import asyncio
import importlib
import operator
from typing import Annotated, Any

from typing_extensions import TypedDict

from tests.parity import helpers as h

CFG = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(lib: Any, saver: Any, seen: list[Any], *, nested: bool = False) -> Any:
    """``bad`` fails next to ``sib``; its handler records where it runs, then asks a human."""
    NodeError = __import__(f"{lib.name}.errors", fromlist=["NodeError"]).NodeError

    def bad(state: State) -> dict:
        seen.append("bad ran")
        raise ValueError("boom")

    def sib(state: State) -> dict:
        return {"log": ["sib"]}

    def handler(state: State, config, error: NodeError) -> dict:  # type: ignore[no-untyped-def,valid-type]  # untyped: LangGraph wants RunnableConfig
        ns = config["configurable"]["checkpoint_ns"]
        seen.append(("handler", ns, config["metadata"]["langgraph_checkpoint_ns"]))
        answer = lib.interrupt(f"fix {error.node}?")
        return {"log": [f"handled: {answer}"]}

    builder = lib.StateGraph(State).add_node("bad", bad, error_handler=handler)
    builder.add_node("sib", sib).add_edge(lib.START, "bad").add_edge(lib.START, "sib")
    if not nested:
        return builder.compile(checkpointer=saver)
    outer = lib.StateGraph(State).add_node("sub", builder.compile())
    return outer.add_edge(lib.START, "sub").compile(checkpointer=saver)


def _tasks(chunks: list[Any]) -> list[Any]:
    """(namespace, task id, name) of every task chunk: what the ids are made of
    (sorted: tasks of one step end in any order)."""
    got = [(ns, c["id"], c["name"]) for ns, mode, c in chunks if mode == "tasks"]
    return sorted(got, key=lambda t: (len(t[0]), t[2]))


def test_handler_namespace_task_id_and_interrupt_id_match_langgraph() -> None:
    def scenario(lib: Any, checkpointer: Any, durability: str | None) -> h.Observations:
        out: h.Observations = []
        for nested in (False, True):
            seen: list[Any] = []
            graph = _graph(lib, checkpointer, seen, nested=nested)
            cfg = {"configurable": {"thread_id": f"n{nested}"}}
            chunks = list(graph.stream({"log": []}, cfg, stream_mode=["tasks"], subgraphs=True))
            paused = graph.get_state(cfg, subgraphs=True)
            out += [("tasks", _tasks(chunks)), ("seen", seen), ("paused", paused)]
        return out

    h.run_parity(scenario)


def test_a_langgraph_thread_paused_in_a_handler_resumes_by_interrupt_id() -> None:
    """The same checkpoint resumed by each library runs the same task ids and
    namespaces, and the interrupt id LangGraph gave answers ours (it used to
    interrupt again under a new id)."""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    from langgraph.checkpoint.memory import InMemorySaver as LGSaver

    from threadloom.checkpoint.memory import InMemorySaver
    from threadloom.checkpoint.migrate import import_langgraph

    for nested in (False, True):
        source, seen = LGSaver(), []
        paused = _graph(lg, source, seen, nested=nested).invoke({"log": []}, CFG)
        (pending,) = paused["__interrupt__"]
        target = InMemorySaver()
        import_langgraph(source, target)
        runs = {}
        for lib, saver in ((lg, source), (tl, target)):
            seen = []
            graph = _graph(lib, saver, seen, nested=nested)
            answer = lib.Command(resume={pending.id: "yes"})
            chunks = list(graph.stream(answer, CFG, stream_mode=["tasks"], subgraphs=True))
            state = graph.get_state(CFG)
            runs[lib.name] = (_tasks(chunks), seen, state.values, state.next, state.interrupts)
        assert runs["threadloom"] == runs["langgraph"], nested
        tasks, seen, values, nxt, interrupts = runs["threadloom"]
        assert "bad ran" not in seen and interrupts == () and nxt == ()
        assert values["log"].count("handled: yes") == 1
        handler_ns = [ns for _, ns, _ in (s for s in seen if s != "bad ran")]
        assert handler_ns and all("|__error_handler__bad:" in ns for ns in handler_ns)


async def test_a_default_timeout_applies_to_handlers() -> None:
    """Deliberate difference (docs/compatibility.md): LangGraph's builder gives
    handlers the default timeout, but its handler task drops it; ours keeps it."""

    async def run(lib: Any) -> Any:
        async def bad(state: State) -> dict:
            raise ValueError("boom")

        async def stuck(state: State) -> dict:
            try:  # cancelled by the node timeout; else it ends and says so
                await asyncio.wait_for(asyncio.Event().wait(), 0.5)
            except asyncio.TimeoutError:
                pass
            return {"log": ["late"]}

        builder = lib.StateGraph(State).set_node_defaults(timeout=0.05)
        graph = builder.add_node("bad", bad, error_handler=stuck).add_edge(lib.START, "bad")
        try:
            return await graph.compile().ainvoke({"log": []})
        except Exception as exc:
            return exc

    assert await run(h._lib("langgraph")) == {"log": ["late"]}
    got = await run(h._lib("threadloom"))
    assert isinstance(got, importlib.import_module("threadloom.errors").NodeTimeoutError)
    assert "__error_handler__bad" in str(got)

"""Parity: ``stream_mode="messages"`` yields LLM token chunks and node-returned
messages as ``(message, metadata)``, as LangGraph, with langchain_core's fake chat
models (sync and async, mixed modes, subgraphs, config passed or not)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from tests.parity import helpers as h

fake = pytest.importorskip("langchain_core.language_models.fake_chat_models")
msgs = pytest.importorskip("langchain_core.messages")

CFG = {"configurable": {"thread_id": "m1"}}


class DictState(TypedDict):
    messages: Annotated[list, operator.add]


def _model(text: str, mid: str) -> Any:
    return fake.GenericFakeChatModel(messages=iter([msgs.AIMessage(content=text, id=mid)]))


def _shape(chunk: Any) -> Any:
    """A message as (kind, content, id), its metadata as a sorted dict."""
    if isinstance(chunk, tuple) and len(chunk) == 2 and isinstance(chunk[1], dict):
        msg, meta = chunk
        if isinstance(msg, msgs.BaseMessage):
            return ((type(msg).__name__, msg.content, msg.id), dict(sorted(meta.items())))
    if isinstance(chunk, tuple):
        return tuple(_shape(c) for c in chunk)
    return chunk


def _chat_graph(lib: Any, saver: Any, pass_config: bool, tags: Any = None) -> Any:
    llm = _model("hello there friend", "ai1")

    def chat(state, config):
        out = (
            llm.invoke(state["messages"], config) if pass_config else llm.invoke(state["messages"])
        )
        return {"messages": [out]}

    def plain(state):
        return {"messages": [msgs.AIMessage(content="plain", id="ai2"), state["messages"][0]]}

    g = lib.StateGraph(lib.MessagesState)
    g.add_node("chat", chat, metadata={"tags": tags} if tags else None)
    g.add_node("plain", plain)
    g.add_edge(lib.START, "chat")
    g.add_edge("chat", "plain")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("pass_config", [False, True], ids=["no_config", "config"])
@pytest.mark.parametrize("mode", ["messages", ["messages", "updates"]], ids=["one", "mixed"])
def test_tokens_and_node_messages(pass_config: bool, mode: Any) -> None:
    def sc(lib, saver, durability):
        app = _chat_graph(lib, saver, pass_config)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        return [("chunks", [_shape(c) for c in app.stream(inp, CFG, stream_mode=mode)])]

    h.run_parity(sc)


async def test_tokens_async() -> None:
    async def sc(lib, saver, durability):
        llm = _model("a b c", "ai1")

        async def chat(state):
            return {"messages": [await llm.ainvoke(state["messages"])]}

        g = lib.StateGraph(lib.MessagesState)
        g.add_node("chat", chat)
        g.add_edge(lib.START, "chat")
        app = g.compile(checkpointer=saver)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        mode = ["messages", "updates"]
        return [("chunks", [_shape(c) async for c in app.astream(inp, CFG, stream_mode=mode)])]

    await h.arun_parity(sc)


def _parent_graph(lib: Any, saver: Any) -> Any:
    llm = _model("x y", "ai-sub")

    def chat(state):
        return {"messages": [llm.invoke(state["messages"])]}

    def quiet(state):
        silent = _model("shh", "ai-quiet").with_config(tags=["nostream"])
        return {"messages": [silent.invoke(state["messages"])]}

    child = lib.StateGraph(lib.MessagesState)
    child.add_node("chat", chat)
    child.add_node("quiet", quiet)
    child.add_edge(lib.START, "chat")
    child.add_edge("chat", "quiet")

    def after(state):
        return lib.Command(update={"messages": [msgs.AIMessage(content="done", id="ai-p")]})

    g = lib.StateGraph(lib.MessagesState)
    g.add_node("inner", child.compile())
    g.add_node("after", after)
    g.add_edge(lib.START, "inner")
    g.add_edge("inner", "after")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("subgraphs", [False, True], ids=["root", "subgraphs"])
def test_subgraph_messages(subgraphs: bool) -> None:
    def sc(lib, saver, durability):
        app = _parent_graph(lib, saver)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        kw = {"stream_mode": ["messages", "updates"], "subgraphs": subgraphs}
        return [("chunks", [_shape(c) for c in app.stream(inp, CFG, **kw)])]

    h.run_parity(sc)


async def test_subgraph_messages_async() -> None:
    async def sc(lib, saver, durability):
        app = _parent_graph(lib, saver)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        kw = {"stream_mode": "messages", "subgraphs": True}
        return [("chunks", [_shape(c) async for c in app.astream(inp, CFG, **kw)])]

    await h.arun_parity(sc)


def test_dict_messages_without_langchain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without LangChain the stream is a plain object: node-returned messages,
    dicts included, are still yielded once (threadloom only: LangGraph needs LangChain)."""
    from threadloom.graph import START, StateGraph
    from threadloom.pregel import messages as mm

    monkeypatch.setattr(mm, "_HANDLER_CLS", [mm.MessagesStream])

    said = {"role": "ai", "content": "yo", "id": "d1"}
    g = StateGraph(DictState)
    g.add_node("a", lambda s: {"messages": [said]})
    g.add_node("b", lambda s: {"messages": [s["messages"][-1], {"role": "ai", "content": "x"}]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    out = list(
        g.compile().stream(
            {"messages": [{"role": "user", "content": "hi"}]}, stream_mode="messages"
        )
    )
    assert [(m["content"], meta["langgraph_node"]) for m, meta in out] == [("yo", "a"), ("x", "b")]
    assert out[0][1]["langgraph_step"] == 1 and out[0][1]["ls_integration"] == "langgraph"


def test_non_messages_not_streamed() -> None:
    """A dict with a role but no content, or an object with id/content fields that is
    no LangChain message, is not a message (LangGraph streams neither)."""
    from pydantic import BaseModel

    from threadloom.graph import START, StateGraph

    class Doc(BaseModel):
        id: str
        content: str

    g = StateGraph(DictState)
    g.add_node("a", lambda s: {"messages": [{"role": "admin"}, Doc(id="1", content="c")]})
    g.add_node("b", lambda s: {"messages": [{"role": "ai", "content": "ok", "id": "k"}]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    out = list(g.compile().stream({"messages": []}, stream_mode="messages"))
    assert [(m, meta["langgraph_node"]) for m, meta in out] == [
        ({"role": "ai", "content": "ok", "id": "k"}, "b")
    ]


def test_whole_messages_tool_messages_and_echoed_input() -> None:
    """Models that do not stream yield their whole message once; a ToolMessage a node
    returns is yielded; the input the node echoes back is not."""

    def sc(lib, saver, durability):
        whole = fake.FakeMessagesListChatModel(responses=[msgs.AIMessage(content="w", id="w1")])
        listed = fake.FakeListChatModel(responses=["r1"])

        def node(state):
            a, b = whole.invoke(state["messages"]), listed.invoke(state["messages"])
            tool = msgs.ToolMessage(content="t", tool_call_id="c1", id="t1")
            return {"messages": [a, b, tool, *state["messages"]]}

        g = lib.StateGraph(lib.MessagesState)
        g.add_node("node", node)
        g.add_edge(lib.START, "node")
        app = g.compile(checkpointer=saver)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        out = [_shape(c) for c in app.stream(inp, CFG, stream_mode="messages")]
        return [("chunks", [(m[0], m[2] if m[0] != "AIMessageChunk" else "<id>") for m, _ in out])]

    h.run_parity(sc)


def test_child_streamed_inside_a_node() -> None:
    """A node streaming a child graph with mode "messages" gets the child's tokens; the
    outer stream (subgraphs off) yields only what the node returns."""

    def sc(lib, saver, durability):
        inner = lib.StateGraph(lib.MessagesState)
        llm = _model("p q", "ai-in")
        inner.add_node("chat", lambda s: {"messages": [llm.invoke(s["messages"])]})
        inner.add_edge(lib.START, "chat")
        child = inner.compile()
        seen: list[Any] = []

        def node(state):
            seen.extend(_shape(c) for c in child.stream(state, stream_mode="messages"))
            return {"messages": [msgs.AIMessage(content="done", id="d")]}

        g = lib.StateGraph(lib.MessagesState)
        g.add_node("node", node)
        g.add_edge(lib.START, "node")
        app = g.compile(checkpointer=saver)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        out = [_shape(c) for c in app.stream(inp, CFG, stream_mode="messages")]
        return [("outer", out), ("inner", seen)]

    h.run_parity(sc)


def test_interrupt_and_resume() -> None:
    def sc(lib, saver, durability):
        def ask(state):
            reply = _model("q1 q2", "ai-q").invoke(state["messages"])
            answer = lib.interrupt("ok?")
            return {"messages": [reply, msgs.HumanMessage(content=answer, id="ans")]}

        g = lib.StateGraph(lib.MessagesState)
        g.add_node("ask", ask)
        g.add_edge(lib.START, "ask")
        app = g.compile(checkpointer=saver)
        mode = ["messages", "updates"]
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        first = [_shape(c) for c in app.stream(inp, CFG, stream_mode=mode)]
        resumed = [_shape(c) for c in app.stream(lib.Command(resume="yes"), CFG, stream_mode=mode)]
        return [("first", first), ("resumed", resumed)]

    h.run_parity(sc)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_model_called_in_a_router(use_async: bool) -> None:
    """A routing function runs in its node's context: its model call streams too."""

    async def sc(lib, saver, durability):
        def route(state):
            _model("r s", "rr").invoke(state["messages"])
            return lib.END

        g = lib.StateGraph(lib.MessagesState)
        g.add_node("node", lambda s: {"messages": [msgs.AIMessage(content="n", id="n1")]})
        g.add_edge(lib.START, "node")
        g.add_conditional_edges("node", route)
        app = g.compile(checkpointer=saver)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        if use_async:
            return [
                ("chunks", [_shape(c) async for c in app.astream(inp, CFG, stream_mode="messages")])
            ]
        return [("chunks", [_shape(c) for c in app.stream(inp, CFG, stream_mode="messages")])]

    await h.arun_parity(sc)


def test_caller_tags_metadata_and_callback_manager() -> None:
    """A model bound with its own tags and called without config keeps the caller's tags
    in its metadata; a caller's CallbackManager lends a node's model calls made without
    config only its inheritable handlers (none here). (A node passing its config gives
    them the manager as is: context.py, reported.)"""
    from langchain_core.callbacks import BaseCallbackHandler, CallbackManager

    class Count(BaseCallbackHandler):
        def __init__(self) -> None:
            self.tokens = 0

        def on_llm_new_token(self, *args: Any, **kwargs: Any) -> None:
            self.tokens += 1

    def sc(lib, saver, durability):
        def tagged(state):
            model = _model("a", "x").with_config(tags=["mytag"])
            return {"messages": [model.invoke(state["messages"])]}

        g = lib.StateGraph(lib.MessagesState)
        g.add_node("node", tagged)
        g.add_node(
            "n2", lambda s, config: {"messages": [_model("b", "y").invoke(s["messages"], config)]}
        )
        g.add_edge(lib.START, "node")
        g.add_edge("node", "n2")
        app = g.compile(checkpointer=saver)
        inp = {"messages": [msgs.HumanMessage(content="hi", id="h1")]}
        cfg = {**CFG, "tags": ["top"], "metadata": {"k": 1}}
        tagged_out = [_shape(c) for c in app.stream(inp, cfg, stream_mode="messages")]
        count = Count()
        cfg2 = {"configurable": {"thread_id": "m2"}, "callbacks": CallbackManager([count])}
        one = lib.StateGraph(lib.MessagesState)  # no config passed: the manager's path
        one.add_node("node", tagged)
        one.add_edge(lib.START, "node")
        managed = [_shape(c) for c in one.compile().stream(inp, cfg2, stream_mode="messages")]
        return [("tags", tagged_out), ("manager", managed), ("tokens", count.tokens)]

    h.run_parity(sc)

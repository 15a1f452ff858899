"""The README quickstart, verbatim, must run (a chat agent with SQLite persistence)."""

from __future__ import annotations

import textwrap

import pytest

QUICKSTART = textwrap.dedent(
    """
    import sqlite3
    from threadloom.graph import StateGraph, MessagesState, START, END
    from threadloom.checkpoint.sqlite import SqliteSaver

    def fake_llm(messages):  # stand-in for a real model call
        return {"role": "assistant", "content": f"{len(messages)} messages so far"}

    def chat(state: MessagesState) -> dict:
        return {"messages": [fake_llm(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    graph = builder.compile(checkpointer=SqliteSaver(sqlite3.connect("agent.db", check_same_thread=False)))

    config = {"configurable": {"thread_id": "alice"}}
    graph.invoke({"messages": [{"role": "user", "content": "hi"}]}, config)
    out = graph.invoke({"messages": [{"role": "user", "content": "still there?"}]}, config)
    print(out["messages"][-1]["content"])  # -> "3 messages so far": the thread remembers
    for snap in graph.get_state_history(config):
        print(snap.metadata["step"], snap.metadata["source"], snap.next)
    """
)


def test_quickstart_runs_and_remembers(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("threadloom.checkpoint.sqlite")
    monkeypatch.chdir(tmp_path)
    exec(
        compile(QUICKSTART, "README-quickstart", "exec", dont_inherit=True),
        {"__name__": "quickstart"},
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "3 messages so far"
    assert lines[1:] == [
        "4 loop ()",
        "3 loop ('chat',)",
        "2 input ('__start__',)",
        "1 loop ()",
        "0 loop ('chat',)",
        "-1 input ('__start__',)",
    ]
    assert (tmp_path / "agent.db").exists()

"""Graph builders for LangGraph's bench shapes, written once against a :class:`Side`.

Our own code following the shapes described in LangGraph's ``libs/langgraph/bench``;
random strings are made deterministic so both sides end in the same state.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, TypedDict

from bench.sides import Side
from bench.workloads.common import agent_loop, chain

__all__ = ["fanout_to_subgraph", "react_agent", "sequential", "wide_state"]


def _noop(state: Any) -> None:
    return None


def sequential(side: Side, n: int):
    """A chain of ``n`` no-op nodes on MessagesState."""
    return chain(side, side.get("MessagesState"), _noop, n)


def _last_wins(x: Any, y: Any) -> Any:
    return y or x


def _overwrite(_: Any, y: Any) -> Any:
    return y


def _unless_none(x: Any, y: Any) -> Any:
    return y if y is not None else x


@dataclass(kw_only=True)
class WideState:
    messages: Annotated[list, operator.add] = field(default_factory=list)
    trigger_events: Annotated[list, operator.add] = field(default_factory=list)
    primary_issue_medium: Annotated[str, _last_wins] = field(default="email")
    autoresponse: Annotated[dict | None, _overwrite] = field(default=None)
    issue: Annotated[dict | None, _last_wins] = field(default=None)
    relevant_rules: list[dict] | None = field(default=None)
    memory_docs: list[dict] | None = field(default=None)
    categorizations: Annotated[list[dict], operator.add] = field(default_factory=list)
    responses: Annotated[list[dict], operator.add] = field(default_factory=list)
    user_info: Annotated[dict | None, _unless_none] = field(default=None)
    crm_info: Annotated[dict | None, _unless_none] = field(default=None)
    email_thread_id: Annotated[str | None, _unless_none] = field(default=None)
    slack_participants: Annotated[dict, operator.or_] = field(default_factory=dict)
    bot_id: str | None = field(default=None)
    notified_assignees: Annotated[dict, operator.or_] = field(default_factory=dict)


_LIST_FIELDS = {
    "messages",
    "trigger_events",
    "categorizations",
    "responses",
    "memory_docs",
    "relevant_rules",
}
_DICT_FIELDS = {
    "user_info",
    "crm_info",
    "slack_participants",
    "notified_assignees",
    "autoresponse",
    "issue",
}


def _read_write(n: int, read: str, write: Sequence[str], state: WideState) -> dict:
    val = getattr(state, read)
    val = {val: val} if isinstance(val, str) else val
    single = val[-1] if isinstance(val, list) else val
    as_list = val if isinstance(val, list) else [val]
    out: dict[str, Any] = {}
    for k in write:
        if k in _LIST_FIELDS:
            out[k] = as_list
        elif k in _DICT_FIELDS:
            out[k] = single
        else:
            out[k] = (k * (n // len(k) + 1))[:n]
    return out


def wide_state(side: Side, n: int):
    """6 nodes over a 15-field dataclass state, looping until len(messages) > n."""
    rw = partial(_read_write, n)
    builder = side.get("StateGraph")(WideState)
    end = side.get("END")
    builder.add_edge(side.get("START"), "one")
    builder.add_node("one", partial(rw, "messages", ["trigger_events", "primary_issue_medium"]))
    builder.add_edge("one", "two")
    builder.add_node("two", partial(rw, "trigger_events", ["autoresponse", "issue"]))
    builder.add_edge("two", "three")
    builder.add_edge("two", "four")
    builder.add_node("three", partial(rw, "autoresponse", ["relevant_rules"]))
    cats = ["categorizations", "responses", "memory_docs"]
    builder.add_node("four", partial(rw, "trigger_events", cats))
    info = ["user_info", "crm_info", "email_thread_id", "slack_participants", "bot_id"]
    builder.add_node("five", partial(rw, "categorizations", [*info, "notified_assignees"]))
    builder.add_edge(["three", "four"], "five")
    builder.add_edge("five", "six")
    builder.add_node("six", partial(rw, "responses", ["messages"]))
    builder.add_conditional_edges("six", lambda s: end if len(s.messages) > n else "one")
    return builder


class OverallState(TypedDict):
    subjects: list
    jokes: Annotated[list, operator.add]


class JokeInput(TypedDict):
    subject: Any


class JokeOutput(TypedDict):
    jokes: list


class JokeState(JokeInput, JokeOutput):
    pass


def _edit(s: JokeInput) -> dict:
    return {"subject": f"{s['subject']} - hohoho"}


def _generate(s: JokeInput) -> dict:
    return {"jokes": [f"Joke about {s['subject']}"]}


def _bump(s: JokeOutput) -> dict:
    return {"jokes": [s["jokes"][0] + " a"]}


def fanout_to_subgraph(side: Side):
    """START -(Send per subject)-> compiled subgraph (edit -> generate -> bump loop)."""
    sg, end, send = side.get("StateGraph"), side.get("END"), side.get("Send")
    sub = sg(JokeState, input_schema=JokeInput, output_schema=JokeOutput)
    sub.add_node("edit", _edit)
    sub.add_node("generate", _generate)
    sub.add_node("bump", _bump)
    sub.add_edge(side.get("START"), "edit")
    sub.add_edge("edit", "generate")
    sub.add_edge("generate", "bump")
    sub.add_conditional_edges(
        "bump", lambda s: end if s["jokes"][0].endswith(" a" * 10) else "bump"
    )
    sub.add_edge("generate", end)
    builder = sg(OverallState)
    builder.add_node("generate_joke", sub.compile())
    builder.add_conditional_edges(
        side.get("START"), lambda s: [send("generate_joke", {"subject": x}) for x in s["subjects"]]
    )
    builder.add_edge("generate_joke", end)
    return builder


def react_agent(side: Side, n_tools: int):
    """A ReAct loop with a scripted model: ``n_tools`` tool calls (3.6 KB args), then an answer."""
    from langchain_core.messages import AIMessage, ToolMessage

    reducer = side.get("add_messages")
    state = TypedDict("ReactState", {"messages": Annotated[list, reducer]})  # noqa: UP013

    def agent(s: dict) -> dict:
        done = sum(1 for m in s["messages"] if getattr(m, "type", None) == "ai")
        if done < n_tools:
            call = {"id": f"call-{done}", "name": "search", "args": {"query": f"{done:036d}" * 100}}
            return {"messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{done}")]}
        return {"messages": [AIMessage(content="answer" * 100, id=f"ai-{done}")]}

    def tools(s: dict) -> dict:
        calls = s["messages"][-1].tool_calls
        return {
            "messages": [
                ToolMessage(
                    content=f"result for query: {c['args']['query']}" * 10,
                    tool_call_id=c["id"],
                    id=f"tool-{c['id']}",
                )
                for c in calls
            ]
        }

    return agent_loop(
        side, state, agent, tools, lambda s: bool(getattr(s["messages"][-1], "tool_calls", None))
    )

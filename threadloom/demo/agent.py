"""A customer-support agent with a scripted fake model, used by ``threadloom demo``.

The "model" is a pure function of the conversation, so every run prints the same
story. Nodes count their calls in a small JSON file (path in
``THREADLOOM_DEMO_CALLS``) so a crashed process and the process that resumes it
can prove together which work was done once.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Annotated, Any

from typing_extensions import NotRequired, TypedDict

from threadloom.constants import END, START
from threadloom.graph import StateGraph, add_messages
from threadloom.types import Command, interrupt

__all__ = ["SupportState", "build_graph", "calls", "reset_calls"]

ORDERS = {
    "A1001": {"item": "blue kettle", "price": 49, "status": "delivered Monday"},
    "A1002": {"item": "tea sampler", "price": 18, "status": "out for delivery"},
}
POLICY = "Returns and refunds within 30 days; damaged items are refunded in full."


def merge_dicts(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Reducer for keyed facts: later lookups add to (or refresh) earlier ones."""
    return {**(old or {}), **(new or {})}


class SupportState(TypedDict):
    messages: Annotated[list, add_messages]
    orders: Annotated[dict, merge_dicts]
    customer: NotRequired[str]
    refund: NotRequired[dict]


# -- call counters shared across processes ------------------------------------------


def _calls_path() -> Path | None:
    path = os.environ.get("THREADLOOM_DEMO_CALLS")
    return Path(path) if path else None


_lock = threading.Lock()


def _count(node: str) -> None:
    path = _calls_path()
    if path is None:
        return
    with _lock:  # parallel tasks of one step run in threads
        data = calls()
        data[node] = data.get(node, 0) + 1
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


def calls() -> dict[str, int]:
    """How many times each node has started, across every process of this demo run."""
    path = _calls_path()
    if path is None or not path.exists():
        return {}
    return json.loads(path.read_text() or "{}")


def reset_calls() -> None:
    path = _calls_path()
    if path is not None:
        path.write_text("{}")


# -- the scripted model --------------------------------------------------------------


def _ai(content: str, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return msg


def _tool_call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def fake_model(state: SupportState) -> dict[str, Any]:
    """Decide the next assistant message from the conversation so far."""
    messages = state["messages"]
    last = messages[-1]
    name = state.get("customer", "there")
    if last.get("role") == "tool":
        return _ai(_answer_from_tools(state, name))
    text = last.get("content", "")
    if m := re.search(r"(?:I'm|I am|my name is)\s+([A-Z][a-z]+)", text):
        return _ai(f"Hi {m.group(1)}! How can I help with your order today?")
    if m := re.search(r"#?(A\d{4})", text):
        order = m.group(1)
        return _ai(
            f"Let me look up {order} and our return policy.",
            [
                _tool_call("lookup_order", f"call-{order}", order=order),
                _tool_call("fetch_policy", f"pol-{order}"),
            ],
        )
    if "refund" in text.lower():
        order = next(reversed(state.get("orders") or {"?": None}))
        return _ai(
            f"I can refund {order}; a supervisor has to approve it.",
            [_tool_call("refund", f"ref-{order}", order=order)],
        )
    if "replacement" in text.lower():
        order = next(reversed(state.get("orders") or {"?": None}))
        return _ai(
            f"No problem, {name}: a replacement {ORDERS.get(order, {}).get('item', 'item')} ships tomorrow, no refund needed."
        )
    return _ai(f"Happy to help, {name}. Could you give me your order number?")


def _answer_from_tools(state: SupportState, name: str) -> str:
    refund = state.get("refund")
    if refund and refund.get("status") == "issued" and not refund.get("told"):
        return f"Done, {name}: ${refund['amount']} for {refund['order']} is on its way back to your card."
    if refund and refund.get("status") == "denied" and not refund.get("told"):
        return (
            f"Sorry {name}, the refund for {refund['order']} was not approved ({refund['note']})."
        )
    orders = state.get("orders") or {}
    order_id = next(reversed(orders))
    order = orders[order_id]
    return (
        f"{name}, {order_id} ({order['item']}, ${order['price']}) was {order['status']}. {POLICY}"
    )


# -- nodes ---------------------------------------------------------------------------


def agent(state: SupportState) -> dict[str, Any]:
    _count("agent")
    update: dict[str, Any] = {"messages": [fake_model(state)]}
    last = state["messages"][-1]
    if last.get("role") == "user" and (
        m := re.search(r"(?:I'm|I am|my name is)\s+([A-Z][a-z]+)", last["content"])
    ):
        update["customer"] = m.group(1)
    refund = state.get("refund")
    if refund and refund.get("status") in ("issued", "denied") and not refund.get("told"):
        update["refund"] = {**refund, "told": True}
    return update


def _pending_call(state: SupportState, name: str) -> dict[str, Any]:
    for msg in reversed(state["messages"]):
        for call in msg.get("tool_calls") or ():
            if call["name"] == name:
                return call
    raise LookupError(f"no pending {name!r} tool call")


def lookup_order(state: SupportState) -> dict[str, Any]:
    _count("lookup_order")
    call = _pending_call(state, "lookup_order")
    order = call["args"]["order"]
    info = ORDERS.get(order, {"item": "unknown", "price": 0, "status": "not found"})
    return {
        "orders": {order: info},
        "messages": [{"role": "tool", "content": json.dumps(info), "tool_call_id": call["id"]}],
    }


def fetch_policy(state: SupportState) -> dict[str, Any]:
    _count("fetch_policy")
    if os.environ.get("THREADLOOM_DEMO_HANG") == "1":
        time.sleep(30)  # the demo kills this process while we "wait for the policy service"
    call = _pending_call(state, "fetch_policy")
    return {"messages": [{"role": "tool", "content": POLICY, "tool_call_id": call["id"]}]}


def request_approval(state: SupportState) -> Command:
    """Pause for a human; the answer arrives as ``Command(resume={...})``."""
    _count("request_approval")
    call = _pending_call(state, "refund")
    order = call["args"]["order"]
    amount = (state.get("orders") or {}).get(order, {}).get("price", 0)
    decision = interrupt({"question": f"Approve a ${amount} refund for {order}?", "order": order})
    refund = {"order": order, "amount": amount, "note": decision.get("note", "")}
    if decision.get("approved"):
        return Command(update={"refund": {**refund, "status": "approved"}}, goto="issue_refund")
    tool_msg = {"role": "tool", "content": "refund denied", "tool_call_id": call["id"]}
    return Command(
        update={"refund": {**refund, "status": "denied"}, "messages": [tool_msg]}, goto="agent"
    )


def issue_refund(state: SupportState) -> dict[str, Any]:
    _count("issue_refund")
    call = _pending_call(state, "refund")
    refund = {**state["refund"], "status": "issued"}
    return {
        "refund": refund,
        "messages": [{"role": "tool", "content": "refund issued", "tool_call_id": call["id"]}],
    }


def route(state: SupportState) -> list[str] | str:
    """Tool calls of the last assistant message decide where to go; none means done."""
    last = state["messages"][-1]
    names = [call["name"] for call in last.get("tool_calls") or ()]
    if "refund" in names:
        return "request_approval"
    return names or END


def build_graph(checkpointer: Any = None) -> Any:
    """The support agent, compiled with ``checkpointer``."""
    builder = StateGraph(SupportState)
    builder.add_node("agent", agent)
    builder.add_node("lookup_order", lookup_order)
    builder.add_node("fetch_policy", fetch_policy)
    builder.add_node("request_approval", request_approval, destinations=("issue_refund", "agent"))
    builder.add_node("issue_refund", issue_refund)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges(
        "agent", route, ["lookup_order", "fetch_policy", "request_approval", END]
    )
    builder.add_edge("lookup_order", "agent")
    builder.add_edge("fetch_policy", "agent")
    builder.add_edge("issue_refund", "agent")
    return builder.compile(checkpointer=checkpointer, name="support-agent")

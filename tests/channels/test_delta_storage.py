"""A ``DeltaChannel`` key costs what a plain reducer key costs on SQLite: linear.

threadloom stores a DeltaChannel's full value in every checkpoint (no
snapshot-and-replay, docs/graph.md) and relies on its storage keeping a growing
list as shared segments plus each step's appendix. If that stopped holding for
this channel kind, stored bytes would grow with the square of the appends.
"""

from __future__ import annotations

import operator
import os
import sqlite3
from collections.abc import Sequence
from typing import Annotated, Any

from typing_extensions import TypedDict

from threadloom.channels import DeltaChannel
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.graph import StateGraph


def extend(state: list, writes: Sequence[Any]) -> list:
    return [*state, *(x for w in writes for x in w)]


class DeltaState(TypedDict):
    items: Annotated[list, DeltaChannel(extend)]


class AddState(TypedDict):
    items: Annotated[list, operator.add]


def _stored_bytes(schema: Any, appends: int, path: str) -> int:
    b = StateGraph(schema)
    b.add_node("a", lambda s: {"items": [f"message {len(s['items']):05d} " + "x" * 80]})
    b.add_edge("__start__", "a")
    with SqliteSaver.from_conn_string(path) as saver:
        graph = b.compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "t"}}
        for _ in range(appends):
            graph.invoke({"items": []}, cfg)
        assert len(graph.get_state(cfg).values["items"]) == appends
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.close()
    return os.path.getsize(path)


def test_delta_channel_storage_is_linear_like_a_plain_reducer(tmp_path):
    sizes = {
        (name, n): _stored_bytes(schema, n, str(tmp_path / f"{name}{n}.db"))
        for name, schema in (("delta", DeltaState), ("add", AddState))
        for n in (100, 200)
    }
    for n in (100, 200):
        assert sizes["delta", n] <= sizes["add", n] * 1.1, sizes
    # twice the appends, about twice the bytes (quadratic would be ~4x of the growth)
    grown = sizes["delta", 200] / sizes["delta", 100]
    assert grown < 2.4, sizes

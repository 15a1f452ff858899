"""``tasks``/``debug`` events carry the run's metadata and tags next to the
node's, as LangGraph's do (parity2 probe: threadloom reported only the node's),
in subgraphs too."""

from __future__ import annotations

import pytest

from tests.parity import helpers as h
from tests.parity.test_stream_modes import _scrub
from tests.parity.test_subgraph_persistence import child_graph, parent_graph

RUN = {"configurable": {"thread_id": "t", "user_id": "u"}, "metadata": {"m": 1}, "tags": ["T"]}


@pytest.mark.parametrize("subgraphs", [False, True], ids=["root", "subgraphs"])
@pytest.mark.parametrize("mode", ["tasks", "debug"])
def test_task_events_carry_run_metadata(mode: str, subgraphs: bool) -> None:
    def sc(lib, saver, durability):
        graph = parent_graph(lib, saver, child_graph(lib))
        kw = {"stream_mode": mode, "subgraphs": subgraphs}
        return [("events", [_scrub(c) for c in graph.stream({"value": []}, RUN, **kw)])]

    h.run_parity(sc)


def test_metadata_is_in_the_payload() -> None:
    lib = h._lib("threadloom")
    with h.open_saver(lib, "memory") as saver:
        graph = parent_graph(lib, saver, child_graph(lib))
        starts = [e for e in graph.stream({"value": []}, RUN, stream_mode="tasks") if "input" in e]
    assert starts and all(e["metadata"]["m"] == 1 and "T" in e["metadata"]["tags"] for e in starts)
    assert all("user_id" not in e["metadata"] for e in starts)

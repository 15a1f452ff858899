"""The runnable example at the top of docs/graph.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def test_graph_md_example_runs(tmp_path, monkeypatch) -> None:
    pytest.importorskip("threadloom.checkpoint.sqlite")
    first = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert first is not None, "docs/graph.md lost its example"
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "graph_md"}
    exec(compile(first.group(1), str(DOC), "exec", dont_inherit=True), scope)
    state = scope["graph"].get_state(scope["config"])
    assert state.values["notes"] == ["looked up 'tides'", "answered"]
    assert (tmp_path / "app.db").exists()

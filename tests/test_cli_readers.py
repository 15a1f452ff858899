"""The CLI's listing commands on real databases: state holding the
application's own classes (not allowed in the CLI's process) and encrypted
state (no key there). They print ids and metadata only, so neither may stop
them, and they still write nothing (review, session 10)."""

from __future__ import annotations

import dataclasses
import enum
import operator
import os
from pathlib import Path
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.test_cli import _snapshot
from threadloom.checkpoint.serde import AesGcmCipher, MsgpackSerializer
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.cli import main
from threadloom.graph import START, StateGraph


class Color(enum.Enum):
    RED = "r"


@dataclasses.dataclass
class Item:
    name: str
    color: Color


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    items: list


def _run(path: Path, serde: Any) -> str:
    """Two turns of a graph whose state holds ``Item``s, saved with ``serde``."""
    with SqliteSaver.from_conn_string(str(path), serde=serde) as saver:
        g = StateGraph(State)
        g.add_node("n", lambda s: {"log": ["n"], "items": [Item("a", Color.RED)]})
        g.add_edge(START, "n")
        app = g.compile(checkpointer=saver)
        for turn in range(2):
            app.invoke({"log": [f"in{turn}"]}, {"configurable": {"thread_id": "t"}})
    return str(path)


@pytest.fixture(params=["app-classes", "encrypted"])
def app_db(request: Any, tmp_path: Path) -> str:
    if request.param == "app-classes":
        serde = MsgpackSerializer(allowed=[Item, Color])
    else:
        serde = MsgpackSerializer(allowed=[Item, Color], cipher=AesGcmCipher(os.urandom(32)))
    return _run(tmp_path / "app.db", serde)


@pytest.mark.parametrize("argv", [["threads"], ["history", "t"], ["tree", "t"]])
def test_listing_commands_read_what_they_cannot_decode(
    app_db: str, argv: list[str], capsys: Any
) -> None:
    before = _snapshot(app_db)
    assert main([argv[0], app_db, *argv[1:]]) == 0
    out, err = capsys.readouterr()
    assert not err
    lines = out.splitlines()
    if argv[0] == "threads":
        assert lines[1].split()[:3] == ["t", "6", "4"]  # 2 turns x 3 checkpoints
    else:
        assert len(lines) == 6 and "step   4" in lines[0 if argv[0] == "history" else -1]
    assert _snapshot(app_db) == before


def test_the_app_still_reads_its_values(tmp_path: Path) -> None:
    """The lenient reading is the CLI's own: the strict default is unchanged."""
    from threadloom.cli import open_readonly
    from threadloom.errors import SerializationError

    db = _run(tmp_path / "app.db", MsgpackSerializer(allowed=[Item, Color]))
    saver = open_readonly(db)
    try:
        with pytest.raises(SerializationError, match="Color|Item"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
    finally:
        saver.conn.close()

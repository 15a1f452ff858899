"""The CLI on a file where one thread's rows are damaged: ``threads`` lists
the readable threads, marks the damaged one ``unreadable: <error>`` and exits
1 with a message on stderr (it used to exit 1 listing nothing); ``history``
prints the checkpoints before the damaged one, then a one-line error."""

from __future__ import annotations

import operator
import sqlite3
import uuid
from pathlib import Path
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.cli import main
from threadloom.graph import START, StateGraph


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _file(path: Path) -> str:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        g = StateGraph(State)
        g.add_node("n", lambda s: {"log": ["n"]})
        g.add_edge(START, "n")
        app = g.compile(checkpointer=saver)
        for thread in ("t1", "t2", "t3"):
            for turn in range(2):
                app.invoke({"log": [f"in{turn}"]}, {"configurable": {"thread_id": thread}})
    return str(path)


def _damage(db: str, how: str) -> str:
    """Damage t2's latest checkpoint; returns its id."""
    conn = sqlite3.connect(db)
    (thread,) = conn.execute("SELECT id FROM tl_threads WHERE thread_id = 't2'").fetchone()
    cid, data = conn.execute(
        "SELECT checkpoint_id, data FROM tl_checkpoints WHERE thread = ?"
        " ORDER BY checkpoint_id DESC LIMIT 1",
        (thread,),
    ).fetchone()
    if how == "record":
        conn.execute("UPDATE tl_checkpoints SET data = ? WHERE checkpoint_id = ?", (data[:3], cid))
    elif how == "record without ts":  # valid parts, no v/ts: a KeyError('ts') traceback
        conn.execute(
            "UPDATE tl_checkpoints SET data = ? WHERE checkpoint_id = ?", (b"\x92\x01\x01", cid)
        )
    else:
        conn.execute("UPDATE tl_checkpoints SET metadata = '{x' WHERE checkpoint_id = ?", (cid,))
    conn.commit()
    conn.close()
    return str(uuid.UUID(bytes=cid))


@pytest.mark.parametrize("how", ["record", "record without ts", "metadata"])
def test_threads_lists_the_healthy_threads_and_marks_the_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    db = _file(tmp_path / "db.sqlite")
    cid = _damage(db, how)
    assert main(["threads", db]) == 1
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(rows) == {"t1", "t2", "t3"}
    assert "unreadable:" in rows["t2"] and cid in rows["t2"]
    assert rows["t1"].split()[1] == rows["t3"].split()[1] == "6"  # checkpoints counted
    assert "1 thread(s) could not be read" in err and "Traceback" not in err


def test_history_and_tree_end_with_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _file(tmp_path / "db.sqlite")
    conn = sqlite3.connect(db)
    (thread,) = conn.execute("SELECT id FROM tl_threads WHERE thread_id = 't2'").fetchone()
    ids = [r[0] for r in conn.execute(
        "SELECT checkpoint_id FROM tl_checkpoints WHERE thread = ? ORDER BY checkpoint_id DESC",
        (thread,),
    )]  # fmt: skip
    conn.execute("UPDATE tl_checkpoints SET metadata = '[1]' WHERE checkpoint_id = ?", (ids[3],))
    conn.commit()
    conn.close()
    assert main(["history", db, "t2"]) == 1
    out, err = capsys.readouterr()
    names = [str(uuid.UUID(bytes=i)) for i in ids]
    assert [line.split()[0] for line in out.splitlines()] == names[:3]  # the newer, readable
    assert err.count("\n") == 1 and "not a JSON object" in err and names[3] in err
    assert main(["tree", db, "t2"]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and names[3] in err
    assert main(["history", db, "t1"]) == 0


def test_threads_lists_a_checkpoint_stored_without_ts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from threadloom.checkpoint.base import empty_checkpoint

    db = str(tmp_path / "db.sqlite")
    with SqliteSaver.from_conn_string(db) as saver:
        cp = empty_checkpoint()
        cp["ts"] = None  # type: ignore[typeddict-item]
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {"step": 0}, {})
    assert main(["threads", db]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[1].split() == ["t", "1", "0", "?"]

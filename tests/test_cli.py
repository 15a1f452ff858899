"""The ``threadloom`` CLI: read-only inspection, escaped output, usage errors,
and a demo that never deletes a file it did not create (reviewer repros, session 8)."""

from __future__ import annotations

import hashlib
import operator
import os
import sqlite3
import sys
from pathlib import Path
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.cli import main, open_readonly, printable
from threadloom.demo.dbfile import DemoFileRefused, is_demo_db, prepare_db

EVIL = "chat-1\x1b[2J\x1b]0;owned\x07"


def _make_db(path: Path, thread: str = "t1", n: int = 3, source: str = "loop") -> str:
    """A threadloom SQLite file holding ``n`` chained checkpoints of ``thread``."""
    with SqliteSaver.from_conn_string(str(path)) as saver:
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for step in range(n):
            config = saver.put(config, empty_checkpoint(), {"step": step, "source": source}, {})
    return str(path)


def _snapshot(db: str) -> tuple[str, set[str]]:
    """The file's bytes (hashed) and its tables: both must survive an inspection."""
    digest = hashlib.sha256(Path(db).read_bytes()).hexdigest()
    conn = sqlite3.connect(db)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    return digest, tables


@pytest.fixture
def db(tmp_path: Path) -> str:
    return _make_db(tmp_path / "state.db")


@pytest.mark.parametrize(
    "argv",
    [["threads"], ["history", "t1"], ["tree", "t1"], ["stats"], ["stats", "--thread", "t1"]],
)
def test_inspection_writes_nothing(db: str, argv: list[str], capsys) -> None:
    before = _snapshot(db)
    assert main([argv[0], db, *argv[1:]]) == 0
    assert capsys.readouterr().out
    assert _snapshot(db) == before


def test_connection_is_read_only(db: str) -> None:
    saver = open_readonly(db)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            saver.conn.execute("CREATE TABLE x (a)")
        assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is not None
    finally:
        saver.conn.close()


def test_langgraph_database_is_named_not_altered(tmp_path: Path, capsys) -> None:
    path = str(tmp_path / "lg.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB)")
    conn.execute("CREATE TABLE writes (thread_id TEXT, value BLOB)")
    conn.commit()
    conn.close()
    before = _snapshot(path)
    for argv in (["threads", path], ["history", path, "t1"], ["stats", path]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "no threadloom checkpoint tables" in err and "LangGraph" in err
    assert _snapshot(path) == before


def test_other_sqlite_file_is_not_altered(tmp_path: Path, capsys) -> None:
    path = str(tmp_path / "app.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    before = _snapshot(path)
    assert main(["threads", path]) == 1
    err = capsys.readouterr().err
    assert "no threadloom checkpoint tables" in err and "LangGraph" not in err
    assert _snapshot(path) == before


def test_not_a_database_is_a_message_not_a_traceback(tmp_path: Path, capsys) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, not sqlite\n" * 200)
    assert main(["threads", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("threadloom: ") and "not a threadloom SQLite database" in err
    assert "Traceback" not in err
    assert path.read_text() == "hello, not sqlite\n" * 200


def test_missing_database(tmp_path: Path, capsys) -> None:
    assert main(["history", str(tmp_path / "absent.db"), "t1"]) == 1
    assert "no database at" in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


@pytest.mark.parametrize("delta, word", [(1, "newer"), (-1, "older")])
def test_schema_version_mismatch_is_reported(db: str, delta: int, word: str, capsys) -> None:
    conn = sqlite3.connect(db)
    top = conn.execute("SELECT max(v) FROM tl_migrations").fetchone()[0]
    if delta > 0:
        conn.execute("INSERT INTO tl_migrations (v) VALUES (?)", (top + 1,))
    else:
        conn.execute("DELETE FROM tl_migrations WHERE v = ?", (top,))
    conn.commit()
    conn.close()
    before = _snapshot(db)
    assert main(["threads", db]) == 1
    assert word in capsys.readouterr().err
    assert _snapshot(db) == before  # never migrated


def test_stored_text_is_escaped(tmp_path: Path, capsys) -> None:
    path = _make_db(tmp_path / "x.db", thread=EVIL, source="loop\x1b[8m")
    for argv in (["threads", path], ["history", path, EVIL], ["tree", path, EVIL]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out
        assert "chat-1\\x1b[2J" in out or argv[0] != "threads"
        assert "loop\\x1b[8m" in out or argv[0] == "threads"


def test_printable() -> None:
    assert printable("support-1 café 例") == "support-1 café 例"
    assert printable("a\nb\rc\x00") == "a\\x0ab\\x0dc\\x00"
    assert printable("x\u202ey\x9b") == "x\\u202ey\\x9b"  # bidi override, C1 CSI


@pytest.mark.parametrize("limit", ["0", "-3", "many"])
def test_history_limit_must_be_positive(db: str, limit: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["history", db, "t1", "--limit", limit])
    assert exc.value.code == 2
    assert "--limit: must be a positive integer" in capsys.readouterr().err


def test_history_limit(db: str, capsys) -> None:
    assert main(["history", db, "t1", "--limit", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_closed_stdout_pipe_exits_quietly(db: str, monkeypatch, capsys) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (``| head``) is gone
    out = open(write_end, "w")  # closed below, after main
    monkeypatch.setattr(sys, "stdout", out)
    try:
        assert main(["history", db, "t1"]) == 1
    finally:
        monkeypatch.undo()
        out.close()  # stdout now points at /dev/null: the final flush succeeds
    assert capsys.readouterr().err == ""


def _foreign_db(tmp_path: Path) -> str:
    return _make_db(tmp_path / "state.db", thread="customer-1234", n=1)


def test_demo_refuses_a_database_it_did_not_create(tmp_path: Path, capsys) -> None:
    db = _foreign_db(tmp_path)
    before = _snapshot(db)
    assert main(["demo", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "not a threadloom demo database" in err and "--force" in err
    assert _snapshot(db) == before


@pytest.mark.parametrize("content", [b"", b"my notes\n"])
def test_demo_refuses_other_files(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes"
    path.write_bytes(content)
    with pytest.raises(DemoFileRefused, match="--force"):
        prepare_db(str(path))
    assert path.read_bytes() == content
    with pytest.raises(DemoFileRefused, match="directory"):
        prepare_db(str(tmp_path), force=True)


def test_prepare_db_replaces_only_demo_files_or_forced(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    Path(db + "-wal").write_bytes(b"stale")  # side file without its database
    prepare_db(db)
    assert is_demo_db(db) and not Path(db + "-wal").exists()
    _make_db(Path(db), thread="support-1")  # the demo's run fills its file
    Path(db + "-shm").write_bytes(b"x")
    prepare_db(db)  # a re-run replaces it
    assert is_demo_db(db) and not Path(db + "-shm").exists()
    assert _snapshot(db)[1] == set()  # fresh: empty
    foreign = _foreign_db(tmp_path)
    assert not is_demo_db(foreign)
    prepare_db(foreign, force=True)
    assert is_demo_db(foreign) and _snapshot(foreign)[1] == set()


def test_demo_db_in_a_missing_directory_is_a_refusal_not_a_traceback(tmp_path: Path) -> None:
    """Review finding (session 8): a bare sqlite3.OperationalError traceback."""
    with pytest.raises(DemoFileRefused, match="cannot be created"):
        prepare_db(str(tmp_path / "missing" / "x.db"))


def test_whole_store_stats_name_no_thread(db: str, capsys) -> None:
    assert main(["stats", db]) == 0
    out = capsys.readouterr().out
    assert "(all threads)" in out and "None" not in out
    assert main(["stats", db, "--thread", "t1"]) == 0
    assert "thread_id            t1" in capsys.readouterr().out
    assert main(["stats", db, "--thread", "nosuch"]) == 1  # as history says it (was zeros, 0)
    assert "has no checkpoints" in capsys.readouterr().err


def test_threads_shows_the_root_latest_step_of_a_thread_paused_in_a_subgraph(
    tmp_path, capsys
) -> None:
    """The last step was the subgraph checkpoint's (the newest id of any
    namespace): step 1 for a thread whose state is at step 3."""
    from threadloom.graph import START, StateGraph
    from threadloom.types import interrupt

    S = PausedState
    sub = StateGraph(S)
    sub.add_node("s1", lambda s: {"log": ["s1"]})
    sub.add_node("ask", lambda s: {"log": [interrupt("q")]})
    sub.add_edge(START, "s1")
    sub.add_edge("s1", "ask")
    b = StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("b", lambda s: {"log": ["b"]})
    b.add_node("sub", sub.compile())
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", "sub")
    db = str(tmp_path / "t.db")
    with SqliteSaver.from_conn_string(db) as saver:
        graph = b.compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "paused"}}
        graph.invoke({"log": []}, cfg)
        step = graph.get_state(cfg).metadata["step"]
        total = len(list(saver.list(cfg)))
    assert main(["threads", db]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:3] == ["paused", str(total), str(step)] and step == 2


class PausedState(TypedDict):
    log: Annotated[list, operator.add]

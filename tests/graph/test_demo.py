"""`threadloom demo` runs end to end and proves what it claims."""

from __future__ import annotations

import pytest

from threadloom.cli import main


@pytest.fixture
def demo_db(tmp_path, capsys):
    pytest.importorskip("threadloom.checkpoint.sqlite")
    pytest.importorskip("threadloom.pregel.main")
    db = str(tmp_path / "demo.db")
    assert main(["demo", "--db", db]) == 0
    return db, capsys.readouterr().out


def test_demo_story(demo_db) -> None:
    _, out = demo_db
    assert "two tasks of ONE superstep" in out
    assert "PAUSED for a human" in out
    assert "Done, Dana: $49 for A1001" in out
    assert "exit code -9" in out
    assert "(lookup_order was NOT re-run)" in out
    assert "calls during resume: agent x1, fetch_policy x1 " in out
    assert "a replacement blue kettle" in out
    assert "branch 2/2" in out and "<- latest" in out


def test_inspection_commands(demo_db, capsys) -> None:
    db, _ = demo_db
    assert main(["threads", db]) == 0
    assert "support-1" in capsys.readouterr().out
    assert main(["history", db, "support-1", "--limit", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert main(["tree", db, "support-1"]) == 0
    assert "branch 1/2" in capsys.readouterr().out
    assert main(["history", db, "nope"]) == 1


def test_missing_database_is_a_clear_error(tmp_path, capsys) -> None:
    assert main(["threads", str(tmp_path / "absent.db")]) == 1
    assert "no database at" in capsys.readouterr().err


def test_demo_reruns_on_its_own_file(demo_db, capsys) -> None:
    db, _ = demo_db
    assert main(["demo", "--db", db]) == 0  # `make demo` twice in a row
    assert "branch 2/2" in capsys.readouterr().out
    assert main(["threads", db]) == 0
    assert "support-1" in capsys.readouterr().out

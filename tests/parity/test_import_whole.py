"""import_langgraph per thread: all or nothing, bounded memory, honest counts,
and the CLI's ``--allow`` (review findings, session 10).

A value the target refused halfway through a thread used to leave the target
holding the thread's first checkpoints, which looked like a valid shorter
thread; the whole source was loaded before the first write; a re-run counted
pending writes it did not write."""

from __future__ import annotations

import dataclasses
import gc
import operator
import sys
import warnings
import weakref
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver as LGMemorySaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from tests.parity.test_import_langgraph import _run_langgraph
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.migrate import aimport_langgraph, import_langgraph
from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.errors import SerializationError, StorageError

pytestmark = pytest.mark.filterwarnings("ignore:Deserializing unregistered type")


@dataclasses.dataclass
class Receipt:
    amount: int


class S(TypedDict):
    log: Annotated[list[str], operator.add]
    extra: Any


def _source(saver: Any, threads: dict[str, int]) -> Any:
    """``threads``: thread id -> turns; from the 3rd turn on, state holds a Receipt
    (for thread ids starting with "r" only)."""
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"], "extra": _extra(s)})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    app = g.compile(checkpointer=saver)
    for tid, turns in threads.items():
        cfg = {"configurable": {"thread_id": tid}}
        for turn in range(turns):
            app.invoke({"log": [f"{tid}{turn}"], "extra": tid}, cfg)
    return saver


def _extra(state: dict) -> Any:
    tid = state["extra"] if isinstance(state["extra"], str) else "r"
    return Receipt(len(state["log"])) if tid.startswith("r") and len(state["log"]) > 6 else tid


def _count(saver: Any, tid: str) -> int:
    return len(list(saver.list({"configurable": {"thread_id": tid}})))


def test_a_refused_value_leaves_nothing_of_its_thread() -> None:
    src = _source(LGMemorySaver(), {"a": 2, "r": 4})
    target = InMemorySaver()
    with pytest.raises(SerializationError, match="Receipt"):
        import_langgraph(src, target)
    assert _count(target, "r") == 0  # was 7 of 16: a truncated thread that looked valid
    assert _count(target, "a") == _count(src, "a")  # threads before it are whole
    allowed = InMemorySaver(serde=MsgpackSerializer(allowed=[Receipt]))
    result = import_langgraph(src, allowed)
    assert result.threads == {"a", "r"} and _count(allowed, "r") == _count(src, "r")
    latest = allowed.get_tuple({"configurable": {"thread_id": "r"}})
    assert latest.checkpoint["channel_values"]["extra"] == Receipt(11)


def test_a_refused_value_adds_nothing_to_a_thread_imported_before() -> None:
    src = _source(LGMemorySaver(), {"r": 2})  # no Receipt yet
    target = InMemorySaver()
    import_langgraph(src, target)
    before = _count(target, "r")
    _source(src, {"r": 2})  # the LangGraph app ran on: now with Receipts
    with pytest.raises(SerializationError, match="Receipt"):
        import_langgraph(src, target)
    assert _count(target, "r") == before  # checked before the first new write


async def test_async_refused_value_leaves_nothing_of_its_thread() -> None:
    src = _source(LGMemorySaver(), {"r": 4})
    target = InMemorySaver()
    with pytest.raises(SerializationError, match="Receipt"):
        await aimport_langgraph(src, target)
    assert _count(target, "r") == 0


class _FailingPut(InMemorySaver):
    """Refuses every put after the first ``ok`` ones (a disk full, a lost connection)."""

    def __init__(self, ok: int) -> None:
        super().__init__()
        self.ok = ok

    def put(self, *args: Any, **kwargs: Any) -> Any:
        if self.ok <= 0:
            raise StorageError("disk full")
        self.ok -= 1
        return super().put(*args, **kwargs)


def test_a_failed_write_removes_a_new_thread_and_keeps_an_old_one() -> None:
    src = _source(LGMemorySaver(), {"n": 3, "o": 1})
    target = _FailingPut(ok=10**6)
    import_langgraph(src, target, thread_ids=["o"])
    before = _count(target, "o")
    _source(src, {"o": 2})  # the LangGraph app ran on after the first import
    target.ok = 4
    with pytest.raises(StorageError, match="disk full"):
        import_langgraph(src, target, thread_ids=["n"])
    assert _count(target, "n") == 0
    target.ok = 1
    with pytest.raises(StorageError, match="disk full"):
        import_langgraph(src, target, thread_ids=["o"])
    assert _count(target, "o") == before + 1  # what it held stays (it was imported before)


def test_the_first_error_stays_when_removing_fails_too() -> None:
    class Stuck(_FailingPut):
        def delete_thread(self, *args: Any, **kwargs: Any) -> None:
            raise StorageError("read-only now")

    target = Stuck(ok=2)
    with pytest.raises(StorageError, match="disk full") as info:
        import_langgraph(_source(LGMemorySaver(), {"n": 2}), target)
    notes = "".join(getattr(info.value, "__notes__", []))
    assert sys.version_info < (3, 11) or "removing thread 'n' again failed" in notes


def test_an_unknown_thread_is_not_counted() -> None:
    result = import_langgraph(_source(LGMemorySaver(), {"a": 1}), InMemorySaver(), thread_ids=["x"])
    assert result.threads == set() and result.checkpoints == 0


class _Tracked(dict):
    """A source checkpoint the test can see alive (weakly referenced)."""

    __hash__ = object.__hash__


class _TrackingSource:
    """LangGraph's InMemorySaver, every checkpoint it hands out tracked."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.serde = inner, inner.serde
        self.live: weakref.WeakSet[_Tracked] = weakref.WeakSet()

    def _track(self, tup: Any) -> Any:
        checkpoint = _Tracked(tup.checkpoint)
        self.live.add(checkpoint)
        return tup._replace(checkpoint=checkpoint)

    def list(self, config: Any, **kwargs: Any) -> Any:
        for tup in self.inner.list(config, **kwargs):
            yield self._track(tup)

    def get_tuple(self, config: Any) -> Any:
        tup = self.inner.get_tuple(config)
        return None if tup is None else self._track(tup)


def test_memory_holds_one_checkpoint_at_a_time() -> None:
    source = _TrackingSource(_source(LGMemorySaver(), {"a": 5, "b": 5}))
    peaks: list[int] = []

    class Target(InMemorySaver):
        def put(self, *args: Any, **kwargs: Any) -> Any:
            gc.collect(0)  # (refcounting frees them; generation 0 for any young cycle)
            peaks.append(len(source.live))
            return super().put(*args, **kwargs)

    result = import_langgraph(source, Target())
    assert result.checkpoints == 2 * 5 * 4 and len(peaks) == result.checkpoints
    assert max(peaks) <= 3  # was every checkpoint of the source (40)


def test_a_rerun_reports_what_it_did() -> None:
    lg_saver = LGMemorySaver()
    _run_langgraph(lg_saver)
    target = InMemorySaver()
    first = import_langgraph(lg_saver, target)
    assert first.writes > 0 and first.skipped == first.skipped_writes == 0
    seen: list[tuple[int, int]] = []
    again = import_langgraph(
        lg_saver, target, progress=lambda r: seen.append((r.skipped, r.writes))
    )
    assert (again.checkpoints, again.writes) == (0, 0)  # was "0 checkpoints and 15 writes"
    assert (again.skipped, again.skipped_writes) == (first.checkpoints, first.writes)
    assert seen == [(n, 0) for n in range(1, first.checkpoints + 1)]  # once per checkpoint


def test_cli_allow_names_the_app_classes(tmp_path: Path, capsys: Any) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.cli import main

    src, dest = tmp_path / "lg.db", tmp_path / "tl.db"
    with LGSqliteSaver.from_conn_string(str(src)) as lg_saver:
        _source(lg_saver, {"r": 4})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["import-langgraph", str(src), str(dest)]) == 1
        err = capsys.readouterr().err
        assert "Receipt" in err and "--allow MODULE:CLASS" in err
        assert main(["import-langgraph", str(src), str(dest), "--allow", "nope"]) == 1
        assert "module:Class" in capsys.readouterr().err
        assert main(["import-langgraph", str(src), str(dest), "--allow", "no_such_mod:X"]) == 1
        assert "cannot import" in capsys.readouterr().err
        spec = f"{__name__}:Receipt"
        assert main(["import-langgraph", str(src), str(dest), "--allow", spec]) == 0
        assert "imported 16 checkpoints" in capsys.readouterr().out
        assert main(["import-langgraph", str(src), str(dest), "--allow", spec]) == 0
        out = capsys.readouterr().out
    assert "imported 0 checkpoints and 0 pending writes" in out
    assert "(16 checkpoints and 28 pending writes were there already)" in out
    serde = MsgpackSerializer(allowed=[Receipt])
    with SqliteSaver.from_conn_string(str(dest), serde=serde) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": "r"}})
    assert latest.checkpoint["channel_values"]["extra"] == Receipt(11)

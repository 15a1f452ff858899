"""import_langgraph edge cases from session 13's import probe: a thread the
target holds with checkpoints the source lacks is refused (it silently became
LangGraph's state); encryption on either side does not block the move; a refused
class names where it is and how to trust it; a threadloom saver as the source
is named as such."""

from __future__ import annotations

import dataclasses
import operator
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.migrate import import_langgraph
from threadloom.errors import ConfigError, ImportConflictError, SerializationError


class State(TypedDict):
    log: Annotated[list, operator.add]


@dataclasses.dataclass
class Item:  # not allowlisted on the target
    qty: int


def _graph(lib: Any, saver: Any, pause: bool = True) -> Any:
    def ask(_s: dict) -> dict:
        return {"log": [f"ask:{lib.interrupt('ok?')}"]}

    b = lib.StateGraph(State)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("ask", ask)
    b.add_edge(lib.START, "a")
    b.add_edge("a", "ask")
    return b.compile(checkpointer=saver)


def _cfg(tid: str) -> dict:
    return {"configurable": {"thread_id": tid}}


def _paused_and_imported(lg: Any, source: Any) -> tuple[Any, InMemorySaver]:
    """LangGraph's graph run to its question on thread "t", then imported into a
    fresh threadloom saver: the starting point of most tests here."""
    graph = _graph(lg, source)
    graph.invoke({"log": []}, _cfg("t"))
    target = InMemorySaver()
    import_langgraph(source, target)
    return graph, target


def _prune(source: Any, thread: str, unlink: bool = True) -> None:
    """A LangGraph InMemorySaver's thread as ``PostgresSaver.prune(keep_latest)``
    leaves it: the latest root checkpoint only, without a parent (``unlink``)."""
    spaces = source.storage[thread]
    latest = max(spaces[""])
    for cid in [c for c in spaces[""] if c != latest]:
        del spaces[""][cid]
    if unlink:
        spaces[""][latest] = (*spaces[""][latest][:2], None)


def test_a_thread_the_target_holds_otherwise_is_refused_and_the_others_come_over() -> None:
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    with h.open_saver(lg, "memory") as source:
        lg_graph = _graph(lg, source)
        for tid in ("same-id", "other"):
            lg_graph.invoke({"log": ["langgraph-user"]}, _cfg(tid))
        target = InMemorySaver()
        tl_graph = _graph(tl, target)
        tl_graph.invoke({"log": ["threadloom-user"]}, _cfg("same-id"))
        before = tl_graph.get_state(_cfg("same-id")).values
        with pytest.raises(ImportConflictError, match="'same-id'") as err:
            import_langgraph(source, target)
        assert err.value.thread_ids == ["same-id"]
        assert err.value.result.threads == {"other"}  # the others came over
        assert tl_graph.get_state(_cfg("same-id")).values == before  # left as it was
        assert tl_graph.get_state(_cfg("other")).values == {"log": ["langgraph-user", "a"]}


def test_a_thread_continued_in_threadloom_is_not_imported_again_over_it() -> None:
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    with h.open_saver(lg, "memory") as source:
        lg_graph, target = _paused_and_imported(lg, source)
        assert import_langgraph(source, target).skipped > 0  # unchanged: skipped, fine
        tl_graph = _graph(tl, target)
        tl_graph.invoke(tl.Command(resume="TL"), _cfg("t"))
        lg_graph.invoke(lg.Command(resume="LG"), _cfg("t"))  # the old program went on too
        with pytest.raises(ImportConflictError, match="continued in threadloom"):
            import_langgraph(source, target)
        assert tl_graph.get_state(_cfg("t")).values == {"log": ["a", "ask:TL"]}


@pytest.mark.parametrize("sides", ["eax->gcm", "eax->plain", "plain->gcm"])
def test_encryption_on_either_side_does_not_block_the_move(sides: str, monkeypatch) -> None:
    pytest.importorskip("Crypto")
    pytest.importorskip("cryptography")
    from langgraph.checkpoint.memory import InMemorySaver as LGMemory
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LGEncrypted

    from threadloom.checkpoint.serde import EncryptedSerializer

    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    key = b"k" * 16
    src_enc, dst = sides.split("->")
    source = (
        LGMemory(serde=LGEncrypted.from_pycryptodome_aes(key=key))
        if src_enc == "eax"
        else LGMemory()
    )
    target = (
        InMemorySaver(serde=EncryptedSerializer.from_aes_gcm(b"g" * 32))
        if dst == "gcm"
        else InMemorySaver()
    )
    _graph(lg, source).invoke({"log": ["secret"]}, _cfg("t"))
    result = import_langgraph(source, target)
    assert result.checkpoints == 3
    done = _graph(tl, target).invoke(tl.Command(resume="yes"), _cfg("t"))
    assert done == {"log": ["secret", "a", "ask:yes"]}


def test_a_refused_class_names_thread_checkpoint_path_and_the_way_out() -> None:
    from langgraph.checkpoint.memory import InMemorySaver as LGMemory

    lg = h._lib("langgraph")
    source = LGMemory()
    _graph(lg, source).invoke({"log": [Item(3)]}, _cfg("t"))
    with pytest.raises(SerializationError) as err:
        import_langgraph(source, InMemorySaver())
    text = str(err.value)
    assert "thread 't', checkpoint" in text and "at log[0]" in text
    assert "Compiling the threadloom graph on the target saver" in text
    assert err.value.path == "log[0]"


def test_a_threadloom_saver_as_the_source_is_named() -> None:
    with pytest.raises(ConfigError, match="source is a threadloom saver"):
        import_langgraph(InMemorySaver(), InMemorySaver())


def test_a_source_that_pruned_its_old_checkpoints_is_imported_again() -> None:
    """review13b: the target's older checkpoints, pruned in the source since the
    first import (keep_latest, a shallow saver), are history, not a way of its own."""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    with h.open_saver(lg, "memory") as source:
        graph, target = _paused_and_imported(lg, source)
        graph.invoke(lg.Command(resume="LG"), _cfg("t"))
        _prune(source, "t", unlink=False)  # the link to the target's history kept
        result = import_langgraph(source, target)
        assert result.checkpoints == 1
        assert _graph(tl, target).get_state(_cfg("t")).values == {"log": ["a", "ask:LG"]}


def test_nan_metadata_from_langgraph_is_left_out_not_fatal() -> None:
    """LangGraph copies a NaN float from config["metadata"]; JSON metadata cannot
    hold it: threadloom's runs leave it out, and so does the import."""
    lg = h._lib("langgraph")
    with h.open_saver(lg, "memory") as source:
        _graph(lg, source).invoke({"log": []}, {**_cfg("t"), "metadata": {"score": float("nan")}})
        target = InMemorySaver()
        assert import_langgraph(source, target).checkpoints == 3
        assert all("score" not in t.metadata for t in target.list(_cfg("t")))


def test_the_cli_imports_an_encrypted_langgraph_file_keeping_it_encrypted(
    tmp_path, monkeypatch, capsys
) -> None:
    """The CLI died with a traceback on LangGraph's AES rows; it now reads them
    with LANGGRAPH_AES_KEY, as the LangGraph program did, and encrypts the
    threadloom file with the same key (nothing lands in clear)."""
    pytest.importorskip("Crypto")
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LGEncrypted
    from langgraph.checkpoint.sqlite import SqliteSaver as LGSqliteSaver

    from threadloom.checkpoint.serde import EncryptedSerializer
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.cli import main

    lg = h._lib("langgraph")
    src, dest = tmp_path / "lg.db", tmp_path / "tl.db"
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "k" * 32)
    with LGSqliteSaver.from_conn_string(str(src)) as saver:
        saver.serde = LGEncrypted.from_pycryptodome_aes()
        _graph(lg, saver).invoke({"log": ["top-secret"]}, _cfg("t"))
    monkeypatch.delenv("LANGGRAPH_AES_KEY")
    assert main(["import-langgraph", str(src), str(dest)]) == 1
    assert "set LANGGRAPH_AES_KEY" in capsys.readouterr().err and not dest.exists()
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "w" * 32)  # not the LangGraph program's
    assert main(["import-langgraph", str(src), str(dest)]) == 1
    assert "does not open" in capsys.readouterr().err and not dest.exists()
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "short")
    assert main(["import-langgraph", str(src), str(dest)]) == 1
    assert "LANGGRAPH_AES_KEY" in capsys.readouterr().err and not dest.exists()
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "k" * 32)
    assert main(["import-langgraph", str(src), str(dest)]) == 0
    for stored in tmp_path.glob("tl.db*"):  # the WAL too
        assert b"top-secret" not in stored.read_bytes()
    serde = EncryptedSerializer.from_pycryptodome_aes()
    with SqliteSaver.from_conn_string(str(dest), serde=serde) as saver:
        state = _graph(h._lib("threadloom"), saver).get_state(_cfg("t"))
        assert state.values == {"log": ["top-secret", "a"]} and state.next == ("ask",)


def test_a_source_pruned_without_the_link_is_refused_with_the_way_out() -> None:
    """LangGraph's prune leaves its kept checkpoint without a parent: then the
    target's imported history cannot be told from turns threadloom ran itself
    (review13c: a time rule merged a thread continued in both). Refused, saying
    so; delete_thread on the target then takes LangGraph's."""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    with h.open_saver(lg, "memory") as source:
        graph, target = _paused_and_imported(lg, source)
        graph.invoke(lg.Command(resume="LG"), _cfg("t"))
        _prune(source, "t")
        with pytest.raises(ImportConflictError, match="pruned the checkpoints that linked"):
            import_langgraph(source, target)
        target.delete_thread("t")
        assert import_langgraph(source, target).checkpoints == 1
        assert _graph(tl, target).get_state(_cfg("t")).values == {"log": ["a", "ask:LG"]}


def test_a_threadloom_thread_older_than_the_langgraph_one_is_still_refused() -> None:
    """review13c: made before the LangGraph thread of the same id, its
    checkpoints sorted before all of LangGraph's and passed for pruned history."""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    target = InMemorySaver()
    _graph(tl, target).invoke({"log": ["mine"]}, _cfg("t"))
    with h.open_saver(lg, "memory") as source:
        _graph(lg, source).invoke({"log": ["theirs"]}, _cfg("t"))
        with pytest.raises(ImportConflictError):
            import_langgraph(source, target)
    assert _graph(tl, target).get_state(_cfg("t")).values == {"log": ["mine", "a"]}


def test_metadata_msgpack_cannot_carry_comes_over_as_it_is() -> None:
    """An int beyond 64 bits in metadata (LangGraph and threadloom runs store
    it): the import's conversion raised a bare TypeError."""
    lg = h._lib("langgraph")
    with h.open_saver(lg, "sqlite") as source:  # (its in-memory saver cannot store it)
        _graph(lg, source).invoke({"log": []}, {**_cfg("t"), "metadata": {"big": 2**70}})
        target = InMemorySaver()
        assert import_langgraph(source, target).checkpoints == 3
        assert {t.metadata["big"] for t in target.list(_cfg("t"))} == {2**70}


class _Sub(TypedDict):
    log: Annotated[list, operator.add]


def _with_subgraph(lib: Any, saver: Any) -> Any:
    sub = lib.StateGraph(_Sub)
    sub.add_node("ask1", lambda s: {"log": [f"q1={lib.interrupt('first?')}"]})
    sub.add_node("ask2", lambda s: {"log": [f"q2={lib.interrupt('second?')}"]})
    sub.add_edge(lib.START, "ask1")
    sub.add_edge("ask1", "ask2")
    b = lib.StateGraph(State)
    b.add_node("sub", sub.compile())
    b.add_edge(lib.START, "sub")
    return b.compile(checkpointer=saver)


def test_a_thread_that_went_its_own_way_only_inside_a_subgraph_is_refused() -> None:
    """review13d: threadloom answered the subgraph's first question (a checkpoint
    in the child namespace only) while LangGraph's program answered both: the
    root-only check merged it, and threadloom's answer was lost. (An answer that
    made no checkpoint yet is a pending write: left and counted in
    ``differing_writes``, since LangGraph rewrites those slots itself.)"""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    with h.open_saver(lg, "memory") as source:
        lg_graph = _with_subgraph(lg, source)
        lg_graph.invoke({"log": []}, _cfg("t"))
        target = InMemorySaver()
        import_langgraph(source, target)
        tl_graph = _with_subgraph(tl, target)
        tl_graph.invoke(tl.Command(resume="TL"), _cfg("t"))
        lg_graph.invoke(lg.Command(resume="lg1"), _cfg("t"))
        lg_graph.invoke(lg.Command(resume="lg2"), _cfg("t"))
        with pytest.raises(ImportConflictError):
            import_langgraph(source, target)
        (pending,) = tl_graph.get_state(_cfg("t"), subgraphs=True).tasks[0].state.interrupts
        assert pending.value == "second?"


def test_a_re_import_after_prune_then_a_turn_follows_the_targets_links() -> None:
    """review13d: the new checkpoint's parent is the one LangGraph's prune kept,
    which the target holds: the target's own links reach the rest."""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")
    with h.open_saver(lg, "memory") as source:
        graph, target = _paused_and_imported(lg, source)
        _prune(source, "t")
        graph.invoke(lg.Command(resume="LG"), _cfg("t"))
        assert import_langgraph(source, target).checkpoints == 1
        assert _graph(tl, target).get_state(_cfg("t")).values == {"log": ["a", "ask:LG"]}


@dataclasses.dataclass
class Blocked:
    n: int


def test_a_class_langgraphs_strict_mode_blocks_is_refused_not_stored_as_a_dict(
    monkeypatch,
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver as LGMemory
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    lg = h._lib("langgraph")
    source = LGMemory(serde=JsonPlusSerializer(allowed_msgpack_modules=None))  # strict
    _graph(lg, source).invoke({"log": [Blocked(1)]}, _cfg("t"))
    target = InMemorySaver()
    with pytest.raises(SerializationError, match="strict mode refused .*Blocked"):
        import_langgraph(source, target)
    assert target.get_tuple(_cfg("t")) is None


def test_langgraph_answering_one_of_two_questions_alone_re_imports() -> None:
    """review13e: LangGraph rewrites a task's interrupt/resume slots as it goes;
    counting those as the target's own answers refused ordinary re-imports."""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")

    def graph(lib: Any, saver: Any) -> Any:
        def ask(_s: dict) -> dict:
            return {"log": [f"q1={lib.interrupt('first?')}", f"q2={lib.interrupt('second?')}"]}

        b = lib.StateGraph(State)
        b.add_node("ask", ask)
        b.add_edge(lib.START, "ask")
        return b.compile(checkpointer=saver)

    with h.open_saver(lg, "memory") as source:
        lg_graph = graph(lg, source)
        lg_graph.invoke({"log": []}, _cfg("t"))
        target = InMemorySaver()
        import_langgraph(source, target)
        lg_graph.invoke(lg.Command(resume="A1"), _cfg("t"))
        lg_graph.invoke(lg.Command(resume="A2"), _cfg("t"))
        assert import_langgraph(source, target).checkpoints == 1
        assert graph(tl, target).get_state(_cfg("t")).values == {"log": ["q1=A1", "q2=A2"]}


def test_overlapping_async_imports_put_langgraphs_fallback_back() -> None:
    """review13e: each import saved and restored LangGraph's reconstruction
    fallback; ending out of order left the loud one for the whole process."""
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver as LGMemory
    from langgraph.checkpoint.serde import jsonplus

    from threadloom.checkpoint.migrate import aimport_langgraph

    before = jsonplus._reconstruction_fallback
    lg = h._lib("langgraph")
    sources = [LGMemory(), LGMemory()]
    for i, src in enumerate(sources):
        for n in range(i * 3 + 1):
            _graph(lg, src).invoke({"log": []}, _cfg(f"t{n}"))

    async def both() -> None:
        await asyncio.gather(*(aimport_langgraph(s, InMemorySaver()) for s in sources))

    asyncio.run(both())
    assert jsonplus._reconstruction_fallback is before


def test_an_answer_given_in_threadloom_under_checkpoints_langgraph_built_on_is_refused() -> None:
    """review13f: threadloom answered one of two parallel questions (no new
    checkpoint yet: the task's resume and writes) while LangGraph's program sent
    new input: its checkpoints on top buried the answer."""
    lg, tl = h._lib("langgraph"), h._lib("threadloom")

    def graph(lib: Any, saver: Any) -> Any:
        b = lib.StateGraph(State)
        b.add_node("a", lambda s: {"log": [f"a={lib.interrupt('qa')}"]})
        b.add_node("b", lambda s: {"log": [f"b={lib.interrupt('qb')}"]})
        b.add_edge(lib.START, "a")
        b.add_edge(lib.START, "b")
        return b.compile(checkpointer=saver)

    with h.open_saver(lg, "memory") as source:
        lg_graph = graph(lg, source)
        lg_graph.invoke({"log": ["in1"]}, _cfg("t"))
        target = InMemorySaver()
        import_langgraph(source, target)
        tl_graph = graph(tl, target)
        qa = next(i for i in tl_graph.get_state(_cfg("t")).interrupts if i.value == "qa")
        tl_graph.invoke(tl.Command(resume={qa.id: "TL"}), _cfg("t"))
        lg_graph.invoke({"log": ["in2"]}, _cfg("t"))  # LangGraph went on with new input
        with pytest.raises(ImportConflictError):
            import_langgraph(source, target)
        assert "a=TL" in tl_graph.get_state(_cfg("t")).values["log"]


def test_a_gone_class_inside_a_pydantic_model_is_refused_not_stored_as_none(
    tmp_path, monkeypatch
) -> None:
    """review13f: LangGraph's pydantic branch swallows the loud fallback's error
    and hands over None; the import stored it."""
    import sys

    pytest.importorskip("pydantic")
    (tmp_path / "gone_r13.py").write_text("import enum\nclass Color(enum.Enum):\n    RED = 'red'\n")
    (tmp_path / "keep_r13.py").write_text(
        "import pydantic\nfrom typing import Any\n"
        "class Outer(pydantic.BaseModel):\n    label: str\n    extra: Any = None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import gone_r13
    import keep_r13
    from langgraph.checkpoint.memory import InMemorySaver as LGMemory

    lg = h._lib("langgraph")
    source = LGMemory()
    _graph(lg, source).invoke(
        {"log": [keep_r13.Outer(label="o", extra=gone_r13.Color.RED)]}, _cfg("t")
    )
    (tmp_path / "gone_r13.py").unlink()
    monkeypatch.delitem(sys.modules, "gone_r13")
    target = InMemorySaver().with_allowlist([keep_r13.Outer])
    with pytest.raises(SerializationError, match="cannot rebuild gone_r13.Color"):
        import_langgraph(source, target)
    assert target.get_tuple(_cfg("t")) is None

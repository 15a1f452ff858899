"""Review findings (session 10) on retention, on every backend: a repeated
copy_thread counted its rows' blobs twice, and prune(keep_latest) kept one root
checkpoint per finished subgraph call."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from typing_extensions import TypedDict

from tests.savers.api import Api
from tests.savers.backends import BACKENDS
from tests.savers.test_retention import BIG, cfg, grow, ids
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.storage.ops import BlobRow
from threadloom.constants import ERROR
from threadloom.graph import START, StateGraph
from threadloom.types import Command, interrupt


async def _copied_then_pruned(saver, copies: int) -> dict[str, int]:
    """Raw counts after copying "a" into "b" ``copies`` times (a's writes
    growing in between), deleting "a" and pruning "b": the prune drops the
    checkpoints the writes belong to, so their blobs must go (Redis keeps blobs
    per thread: only a prune inside "b" shows a count too high there)."""
    configs = await grow(saver, 4, "a")
    await saver.put_writes(configs[1], [("x", BIG + "x")], "task", "~p")
    for _ in range(copies - 1):
        await saver.copy_thread("a", "b")
    await saver.put_writes(configs[2], [("y", BIG + "y")], "task2", "~q")
    await saver.copy_thread("a", "b")
    await saver.delete_thread("a")
    b_last = cfg("b", cid=configs[-1]["configurable"]["checkpoint_id"])
    await saver.put_writes(b_last, [("z", BIG + "z")], "other", "~r")
    await saver.prune(["b"], strategy="keep_latest")
    return await saver.raw_counts()


async def test_copy_thread_repeated_counts_each_reference_once(saver) -> None:
    once = await _copied_then_pruned(saver, 1)
    await saver.delete_thread("b")
    assert all(n == 0 for n in (await saver.raw_counts()).values())
    assert await _copied_then_pruned(saver, 3) == once  # not a blob more is held
    assert (await saver.get_tuple(cfg("b"))).pending_writes == [("other", "z", BIG + "z")]
    await saver.delete_thread("b")
    assert all(n == 0 for n in (await saver.raw_counts()).values())


async def _replaced_then_pruned(saver, replace: bool) -> dict[str, int]:
    configs = await grow(saver, 3, "a")
    await saver.put_writes(configs[0], [(ERROR, BIG + "from a")], "task", "~p")
    await saver.copy_thread("a", "b")
    b_first = cfg("b", cid=configs[0]["configurable"]["checkpoint_id"])
    if replace:
        await saver.put_writes(b_first, [(ERROR, BIG + "only b")], "task", "~p")
        assert (await saver.get_tuple(b_first)).pending_writes == [("task", ERROR, BIG + "only b")]
    await saver.copy_thread("a", "b")  # b's row is replaced: its blob goes
    assert (await saver.get_tuple(b_first)).pending_writes == [("task", ERROR, BIG + "from a")]
    await saver.delete_thread("a")
    await saver.prune(["b"], strategy="keep_latest")  # drops the write row
    return await saver.raw_counts()


async def test_copy_thread_replacing_a_write_row_releases_its_blobs(saver) -> None:
    plain = await _replaced_then_pruned(saver, False)
    await saver.delete_thread("b")
    assert await _replaced_then_pruned(saver, True) == plain
    await saver.delete_thread("b")
    assert all(n == 0 for n in (await saver.raw_counts()).values())


async def test_memory_stats_count_stored_blobs() -> None:
    saver = Api(InMemorySaver(), "sync", BACKENDS[0])
    await grow(saver, 2)
    stored = (await saver.raw_counts())["blobs"]
    assert stored > 0 and (await saver.stats())["blobs"] == stored
    saver.raw.executor.blobs[b"\0" * 16] = BlobRow(b"\0" * 16, "raw", b"orphan", b"")
    assert (await saver.stats())["blobs"] == stored + 1  # what is there, held or not
    assert (await saver.stats("t"))["blobs"] == stored


async def test_keep_latest_drops_finished_subgraph_calls(saver) -> None:
    root = await grow(saver, 4)
    root_ids = [c["configurable"]["checkpoint_id"] for c in root]
    await grow(saver, 3, ns="sub:1", parents={"": root_ids[1]})  # finished call
    live = await grow(saver, 2, ns="sub:2", parents={"": root_ids[3]})  # interrupted call
    nested = await grow(
        saver, 2, ns="sub:2|inner:1", parents={"": root_ids[3], "sub:2": ids_of(live)[-1]}
    )
    await grow(saver, 3, ns="keeper", parents={"": root_ids[0]})  # checkpointer=True
    await saver.prune(["t"], strategy="keep_latest")
    assert await ids(saver) == [root_ids[3]]
    assert await ids(saver, ns="sub:1") == []
    assert await ids(saver, ns="sub:2") == [ids_of(live)[-1]]
    assert await ids(saver, ns="sub:2|inner:1") == [ids_of(nested)[-1]]
    assert len(await ids(saver, ns="keeper")) == 1
    msgs = (await saver.get_tuple(live[-1])).checkpoint["channel_values"]["messages"]
    assert len(msgs) == 2


async def test_keep_last_n_keeps_the_calls_of_kept_root_checkpoints(saver) -> None:
    root = await grow(saver, 4)
    root_ids = [c["configurable"]["checkpoint_id"] for c in root]
    await grow(saver, 3, ns="sub:1", parents={"": root_ids[1]})
    call = await grow(saver, 3, ns="sub:2", parents={"": root_ids[2]})
    await saver.prune(["t"], strategy="keep_last_n", keep_last=2)
    assert await ids(saver) == root_ids[:1:-1]
    assert await ids(saver, ns="sub:1") == []
    assert await ids(saver, ns="sub:2") == ids_of(call)[:0:-1]


def ids_of(configs: list[Any]) -> list[str]:
    return [c["configurable"]["checkpoint_id"] for c in configs]


class S(TypedDict):
    log: Annotated[list[str], operator.add]
    big: str
    note: str


class Sub(TypedDict):
    big: str
    note: str


def _graph(saver: Any, ran: list[str], ask: bool):
    def first(s: Sub) -> dict:
        ran.append("first")
        return {"big": "X" * 3000 + s["note"]}

    def second(s: Sub) -> dict:
        answer = interrupt("ok?") if ask and s["note"] == "ask" else "-"
        return {"note": f"sub {answer}"}

    sub = StateGraph(Sub)
    sub.add_node("first", first)
    sub.add_node("second", second)
    sub.add_edge(START, "first")
    sub.add_edge("first", "second")
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": ["a"], "note": s["log"][-1]})
    g.add_node("child", sub.compile())
    g.add_edge(START, "a")
    g.add_edge("a", "child")
    return g.compile(checkpointer=saver)


async def _invoke(saver, app, value: Any, config: dict) -> Any:
    if saver.mode == "sync":
        return app.invoke(value, config)
    return await app.ainvoke(value, config)


async def test_keep_latest_after_subgraph_turns_keeps_one_checkpoint(saver) -> None:
    app, config = _graph(saver.raw, [], ask=False), {"configurable": {"thread_id": "g"}}
    for i in range(6):
        await _invoke(saver, app, {"log": [str(i)]}, config)
    await saver.prune(["g"], strategy="keep_latest")
    rows = await saver.list(config)
    assert len(rows) == 1 and rows[0].config["configurable"]["checkpoint_ns"] == ""
    assert len(rows[0].checkpoint["channel_values"]["log"]) == 6 * 2
    out = await _invoke(saver, app, {"log": ["more"]}, config)
    assert len(out["log"]) == 7 * 2 and out["note"] == "sub -"


async def test_keep_latest_keeps_an_interrupted_subgraph(saver) -> None:
    ran: list[str] = []
    app, config = _graph(saver.raw, ran, ask=True), {"configurable": {"thread_id": "g"}}
    for i in range(3):
        await _invoke(saver, app, {"log": [str(i)]}, config)
    await _invoke(saver, app, {"log": ["ask"]}, config)  # stops inside the subgraph
    runs = len(ran)
    await saver.prune(["g"], strategy="keep_latest")
    namespaces = {r.config["configurable"]["checkpoint_ns"] for r in await saver.list(config)}
    assert len(namespaces) == 2  # the root and the interrupted call
    out = await _invoke(saver, app, Command(resume="yes"), config)
    assert len(ran) == runs  # "first" is not run again: its checkpoint was kept
    assert out["note"] == "sub yes" and len(out["log"]) == 4 * 2

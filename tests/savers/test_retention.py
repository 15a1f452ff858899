"""Erasure, prune safety, delete_for_runs, copy_thread and stats on every backend."""

from __future__ import annotations

import pytest

from threadloom.checkpoint.base import PruneReport, empty_checkpoint, uuid6
from threadloom.constants import INTERRUPT
from threadloom.errors import ConfigError

BIG = "conversation text " * 40


def cfg(thread: str = "t", ns: str = "", cid: str | None = None) -> dict:
    conf = {"thread_id": thread, "checkpoint_ns": ns}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


async def grow(saver, n: int, thread: str = "t", ns: str = "", parents=None, run=None, start=0):
    """n checkpoints appending to a message list (deltas) with a large side value."""
    configs, parent, messages = [], cfg(thread, ns), []
    for i in range(start, start + n):
        messages = messages + [f"{thread} message {i} " + BIG]
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        versions = {"messages": f"{i + 1:032}.0.1", "doc": "1"}
        cp["channel_values"] = {"messages": messages, "doc": {"body": BIG}}
        cp["channel_versions"] = versions
        md = {"source": "loop", "step": i, "parents": parents or {}}
        if run:
            md["run_id"] = run if isinstance(run, str) else run[i - start]
        new = versions if i == start else {"messages": versions["messages"]}
        parent = await saver.put(parent, cp, md, new)
        configs.append(parent)
    return configs


async def ids(saver, thread: str = "t", ns: str | None = "") -> list[str]:
    conf = {"thread_id": thread} if ns is None else {"thread_id": thread, "checkpoint_ns": ns}
    return [
        t.config["configurable"]["checkpoint_id"] for t in await saver.list({"configurable": conf})
    ]


async def test_delete_thread_erases_everything_it_alone_held(saver) -> None:
    await grow(saver, 6, "keep")
    baseline = await saver.raw_counts()
    configs = await grow(saver, 12, "gone")
    await grow(saver, 2, "gone", ns="child:1")
    await saver.put_writes(configs[-1], [("messages", [BIG + "w"]), ("x", 1)], "task")
    await saver.delete_thread("gone")
    assert await saver.raw_counts() == baseline
    assert await saver.get_tuple(cfg("gone")) is None
    assert len((await saver.get_tuple(cfg("keep"))).checkpoint["channel_values"]["messages"]) == 6
    await saver.delete_thread("keep")
    assert all(n == 0 for n in (await saver.raw_counts()).values())


async def test_copy_thread_shares_and_survives_source_deletion(saver) -> None:
    configs = await grow(saver, 5)
    await saver.put_writes(configs[-1], [("x", BIG)], "task", "~p")
    before = (await saver.raw_counts())["blobs"]
    await saver.copy_thread("t", "t2")
    after = (await saver.raw_counts())["blobs"]
    if saver.raw.shares_blobs_across_threads:
        assert after == before  # one content-addressed store for every thread
    else:  # per-thread blobs (Redis): the copy brings its own, all of them
        assert after == 2 * before
    await saver.delete_thread("t")
    copied = await saver.get_tuple(cfg("t2"))
    assert len(copied.checkpoint["channel_values"]["messages"]) == 5
    assert copied.pending_writes == [("task", "x", BIG)]
    assert await ids(saver, "t2") == [c["configurable"]["checkpoint_id"] for c in configs[::-1]]
    with pytest.raises(ConfigError):
        await saver.copy_thread("t2", "t2")


async def test_prune_strategies(saver) -> None:
    a = await grow(saver, 6, "a")
    b = await grow(saver, 6, "b")
    c = await grow(saver, 6, "c")
    report = await saver.prune(["a"], strategy="keep_latest")
    assert isinstance(report, PruneReport) and report.checkpoints == 5 and report.bytes_freed > 0
    assert await ids(saver, "a") == [a[-1]["configurable"]["checkpoint_id"]]
    await saver.prune(["b"], strategy="keep_last_n", keep_last=3)
    assert await ids(saver, "b") == [x["configurable"]["checkpoint_id"] for x in b[:-4:-1]]
    await saver.prune(["c"], strategy="before", before=c[4]["configurable"]["checkpoint_id"])
    assert await ids(saver, "c") == [x["configurable"]["checkpoint_id"] for x in c[:3:-1]]
    for thread, n in (("a", 6), ("b", 6), ("c", 6)):  # survivors still read whole lists
        msgs = (await saver.get_tuple(cfg(thread))).checkpoint["channel_values"]["messages"]
        assert len(msgs) == n
    assert (await saver.get_tuple(b[-3])).checkpoint["channel_values"]["doc"] == {"body": BIG}
    await saver.prune(["a", "b", "c"], strategy="delete")
    assert all(n == 0 for n in (await saver.raw_counts()).values())
    with pytest.raises(ConfigError):
        await saver.prune(["a"], strategy="keep_last_n")
    with pytest.raises(ConfigError):
        await saver.prune(["a"], strategy="everything")


async def test_prune_dry_run_changes_nothing(saver) -> None:
    await grow(saver, 5)
    before = await saver.raw_counts()
    report = await saver.prune(["t"], strategy="keep_latest", dry_run=True)
    assert report.dry_run and report.checkpoints == 4
    assert await saver.raw_counts() == before


@pytest.mark.parametrize(
    "strategy, options",
    [("keep_latest", {}), ("keep_last_n", {"keep_last": 3}), ("delete", {})],
)
async def test_prune_dry_run_reports_what_the_real_run_frees(saver, strategy, options) -> None:
    """Blobs and bytes included, across namespaces and threads sharing values."""
    configs = await grow(saver, 20, "a")  # > compact_every: segments and manifests
    await grow(saver, 4, "a", ns="sub:1", parents={"": configs[3]["configurable"]["checkpoint_id"]})
    await grow(saver, 6, "b")  # same large "doc" value as thread a
    await saver.put_writes(configs[5], [("x", BIG + "w"), ("y", 1)], "task", "~p")
    await saver.copy_thread("b", "c")
    threads = ["a", "b", "c"]
    dry = await saver.prune(threads, strategy=strategy, dry_run=True, **options)
    real = await saver.prune(threads, strategy=strategy, **options)
    assert dry == real._replace(dry_run=True)
    assert real.blobs > 0 and real.bytes_freed > 0


async def test_prune_drops_calls_of_dropped_checkpoints_and_abandoned_interrupts(saver) -> None:
    """An older fork tip left waiting on an interrupt (the user went back and
    took another way) was kept by every prune, so keep_latest history grew with
    each abandoned question (session 13); LangGraph's prune keeps one too."""
    root = await grow(saver, 2)
    fork = await saver.put(root[0], _plain(), {"source": "fork", "step": 9}, {})
    await saver.put_writes(fork, [(INTERRUPT, ["question?"])], "task", "~p")
    await grow(saver, 2, ns="sub:1", parents={"": fork["configurable"]["checkpoint_id"]})
    root += await grow(saver, 2, start=2)
    parent_id = root[1]["configurable"]["checkpoint_id"]
    await grow(saver, 2, ns="sub:2", parents={"": parent_id})  # a finished call
    await saver.prune(["t"], strategy="keep_latest")
    assert await ids(saver) == [root[-1]["configurable"]["checkpoint_id"]]
    assert await ids(saver, ns="sub:2") == [] and await ids(saver, ns="sub:1") == []
    assert await saver.get_tuple(fork) is None


async def test_prune_keeps_the_calls_of_the_latest_checkpoint(saver) -> None:
    """An interrupted subgraph waits on the latest root checkpoint: kept with it."""
    root = await grow(saver, 3)
    latest = root[-1]["configurable"]["checkpoint_id"]
    call = await grow(saver, 2, ns="sub:1", parents={"": latest})
    await saver.put_writes(call[-1], [(INTERRUPT, ["question?"])], "task", "~p")
    await saver.prune(["t"], strategy="keep_latest")
    assert await ids(saver) == [latest]
    assert await ids(saver, ns="sub:1") == [call[-1]["configurable"]["checkpoint_id"]]
    assert (await saver.get_tuple(call[-1])).pending_writes == [("task", INTERRUPT, ["question?"])]


@pytest.mark.parametrize("form", ["typo", "short", "hex", "upper", "urn", "uuid4"])
async def test_prune_before_refuses_what_is_not_a_checkpoint_id_of_the_threads(saver, form) -> None:
    """Compared as text, a typo, the 12-character id ``threadloom tree`` shows,
    another spelling of a UUID or a run id sorted before almost every id: all
    but the latest were deleted (session 13's probe and review13c)."""
    import uuid

    configs = await grow(saver, 5)
    cid = configs[2]["configurable"]["checkpoint_id"]
    before = {
        "typo": "typo",
        "short": cid[-12:],
        "hex": uuid.UUID(cid).hex,
        "upper": cid.upper(),
        "urn": uuid.UUID(cid).urn,
        "uuid4": str(uuid.uuid4()),
    }[form]
    with pytest.raises(ConfigError, match="not the id of a checkpoint of the threads"):
        await saver.prune(["t"], strategy="before", before=before)
    assert len(await ids(saver)) == 5
    await saver.prune(["t"], strategy="before", before=cid)  # the id itself: cuts there
    assert len(await ids(saver)) == 3


def _plain() -> dict:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=9))
    return cp


async def test_delete_for_runs_rebases_survivors(saver) -> None:
    chain = await grow(saver, 10, run=["r1"] * 5 + ["r2"] * 5)
    first, second = chain[:5], chain[5:]
    await saver.delete_for_runs(["r1"])
    assert await ids(saver) == [c["configurable"]["checkpoint_id"] for c in second[::-1]]
    msgs = (await saver.get_tuple(second[0])).checkpoint["channel_values"]["messages"]
    assert len(msgs) == 6 and msgs[0].startswith("t message 0 ")
    assert await saver.get_tuple(first[-1]) is None
    await saver.delete_for_runs([])
    await saver.delete_for_runs(["r2"])
    assert all(n == 0 for n in (await saver.raw_counts()).values())


async def test_stats(saver) -> None:
    configs = await grow(saver, 8, "s1")
    await grow(saver, 2, "s2")
    await saver.put_writes(configs[-1], [("x", 1)], "task")
    everything = await saver.stats()
    assert everything["checkpoints"] == 10 and everything["threads"] == 2
    assert everything["writes"] == 1
    assert everything["bytes_stored"] < everything["bytes_logical"]
    assert "messages" in everything["per_channel"]
    assert everything["largest_threads"][0][0] == "s1"
    one = await saver.stats("s2")
    assert one["checkpoints"] == 2 and one["threads"] == 1
    assert 0 < one["blob_bytes"] <= everything["blob_bytes"]


@pytest.mark.parametrize("channel", ["__error__", "__interrupt__"])
async def test_a_special_channel_written_twice_in_one_call_leaves_no_blob(saver, channel) -> None:
    """Review finding (session 7): the second write to a special channel replaces
    the first in the task's row, but the first value's blob was stored anyway
    with no reference, and survived delete_thread."""
    [config] = await grow(saver, 1, "dup")
    await saver.put_writes(config, [(channel, BIG + "first"), (channel, BIG + "second")], "task")
    [(_, got, value)] = (await saver.get_tuple(config)).pending_writes
    assert (got, value) == (channel, BIG + "second")
    await saver.put_writes(config, [(channel, BIG + "third"), (channel, BIG + "fourth")], "task")
    [(_, _, value)] = (await saver.get_tuple(config)).pending_writes
    assert value == BIG + "fourth"
    await saver.delete_thread("dup")
    assert all(n == 0 for n in (await saver.raw_counts()).values())

"""List deltas, compaction, keyframes and content addressing read back exactly.

The hypothesis test drives random histories (appends, replacements, small and
large values, forks from old checkpoints, copies, prunes, deletes) against a
plain-dict model and checks every surviving checkpoint reads back equal, then
that deleting every thread leaves no row and no blob behind.
"""

from __future__ import annotations

import itertools
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.sqlite import SqliteSaver

_counter = itertools.count(1)


def _saver(kind: str, **options):
    if kind == "memory":
        return InMemorySaver(**options)
    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False), **options)
    saver.setup()
    return saver


def _counts(saver) -> dict[str, int]:
    if isinstance(saver, InMemorySaver):
        ex = saver.executor
        return {
            "checkpoints": len(ex.checkpoints),
            "refs": len(ex.refs),
            "blobs": len(ex.blobs),
            "writes": len(ex.writes),
        }
    tables = ("tl_checkpoints", "tl_refs", "tl_blobs", "tl_writes", "tl_threads")
    return {t: saver.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def _put(saver, parent_cfg, thread, values, versions, changed):
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=next(_counter) % 1000))
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    cp["versions_seen"] = {"node": dict(versions)}
    config = parent_cfg or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    new = {c: versions[c] for c in changed}
    return saver.put(config, cp, {"source": "loop", "step": 1}, new)


def _version(n: int) -> str:
    return f"{n:032}.0.{n}"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_long_append_chain_reads_back_at_every_version(kind) -> None:
    saver = _saver(kind, compact_every=4, keyframe_every=5)
    messages: list = []
    configs, expected, parent = [], [], None
    for i in range(60):
        messages = messages + [{"role": "user", "text": f"message {i} " * 8}]
        versions = {"messages": _version(i + 1), "turn": _version(i + 1)}
        parent = _put(saver, parent, "t", {"messages": messages, "turn": i}, versions, versions)
        configs.append(parent)
        expected.append(list(messages))
    saver.codec.chunks.clear()
    saver.codec.manifests.clear()
    saver.codec.states.clear()
    for config, want in zip(configs, expected):
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == want
    history = list(saver.list({"configurable": {"thread_id": "t"}}))
    assert [len(t.checkpoint["channel_values"]["messages"]) for t in history] == list(
        range(60, 0, -1)
    )
    stats = saver.stats("t")
    assert stats["bytes_stored"] < stats["bytes_logical"] / 5


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_forks_and_copies_share_blobs(kind) -> None:
    saver = _saver(kind, compact_every=4)
    big = {"doc": "z" * 2000}
    versions = {"doc": _version(1)}
    root = _put(saver, None, "t", big, versions, versions)
    before = _counts(saver)
    for i in range(3):  # forks storing the same large value under new versions
        v = {"doc": _version(10 + i)}
        _put(saver, root, "t", dict(big), v, v)
    saver.copy_thread("t", "t-copy")
    saver.copy_thread("t", "t-copy2")
    after = _counts(saver)
    key = "blobs" if kind == "memory" else "tl_blobs"
    assert after[key] == before[key]
    copied = saver.get_tuple({"configurable": {"thread_id": "t-copy2", "checkpoint_ns": ""}})
    assert copied.checkpoint["channel_values"] == big
    saver.delete_thread("t")
    saver.delete_thread("t-copy")
    assert (
        saver.get_tuple({"configurable": {"thread_id": "t-copy2"}}).checkpoint["channel_values"]
        == big
    )
    saver.delete_thread("t-copy2")
    assert all(n == 0 for n in _counts(saver).values())


def test_delta_is_used_for_appends_and_not_for_edits() -> None:
    saver = InMemorySaver(compact_every=100)
    items = [{"n": i, "pad": "p" * 100} for i in range(20)]
    v1, v2, v3 = {"l": _version(1)}, {"l": _version(2)}, {"l": _version(3)}
    c1 = _put(saver, None, "t", {"l": items}, v1, v1)
    blobs_after_first = len(saver.executor.blobs)
    c2 = _put(saver, c1, "t", {"l": items + [{"n": 20}]}, v2, v2)
    assert len(saver.executor.blobs) == blobs_after_first + 1  # one small chunk
    edited = list(items) + [{"n": 20}]
    edited[3] = {"n": "changed"}
    c3 = _put(saver, c2, "t", {"l": edited}, v3, v3)
    assert saver.get_tuple(c3).checkpoint["channel_values"]["l"] == edited
    assert saver.get_tuple(c2).checkpoint["channel_values"]["l"] == items + [{"n": 20}]


# -- randomized histories -------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("drop_first"), st.just(0)),
        st.tuples(st.just("small"), st.integers(0, 5)),
        st.tuples(st.just("big"), st.integers(0, 5)),
        st.tuples(st.just("fork"), st.integers(0, 50)),
        st.tuples(st.just("reload"), st.just(0)),
        st.tuples(st.just("copy"), st.just(0)),
        st.tuples(st.just("prune"), st.integers(1, 3)),
        st.tuples(st.just("delete_runs"), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=30,
)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(script=ops)
def test_random_histories_read_back_exactly(kind, script) -> None:
    saver = _saver(kind, compact_every=3, keyframe_every=3)
    model: dict[str, tuple[dict, dict]] = {}  # checkpoint_id -> (config, values)
    head = None
    values: dict = {"messages": [], "small": 0}
    versions: dict = {}
    seq = itertools.count(1)
    threads = ["t"]
    for op, arg in script:
        changed = []
        if op == "append":
            values = {
                **values,
                "messages": values["messages"] + [f"m{next(seq)}-" + "x" * 30 for _ in range(arg)],
            }
            changed = ["messages"]
        elif op == "drop_first":
            values = {**values, "messages": values["messages"][1:]}
            changed = ["messages"]
        elif op == "small":
            values, changed = {**values, "small": arg}, ["small"]
        elif op == "big":
            values, changed = {**values, "big": {"blob": "b" * 300, "n": arg}}, ["big"]
        elif op in ("fork", "reload") and model:
            cid = sorted(model)[arg % len(model)] if op == "fork" else sorted(model)[-1]
            head = model[cid][0]
            tup = saver.get_tuple(head)
            values = dict(tup.checkpoint["channel_values"])
            values.setdefault("messages", [])
            versions = dict(tup.checkpoint["channel_versions"])
            continue
        elif op == "copy" and model:
            target = f"copy{len(threads)}"
            saver.copy_thread("t", target)
            threads.append(target)
            for cid, (config, vals) in list(model.items()):
                if config["configurable"]["thread_id"] == "t":
                    model[f"{target}/{cid}"] = (
                        {"configurable": {**config["configurable"], "thread_id": target}},
                        vals,
                    )
            continue
        elif op == "prune" and model:
            saver.prune(["t"], strategy="keep_last_n", keep_last=arg)
            mine = sorted(c for c in model if "/" not in c)
            for cid in mine[:-arg]:
                del model[cid]
            if head is not None and head["configurable"]["checkpoint_id"] not in model:
                head = None
            continue
        elif op == "delete_runs" and model:
            mine = sorted(c for c in model if "/" not in c)
            if mine:
                victim = mine[arg % len(mine)]
                saver.delete_for_runs([f"run-{victim}"])  # copies carry the run id too
                for key in [k for k in model if k.split("/")[-1] == victim]:
                    del model[key]
                if head is not None and head["configurable"]["checkpoint_id"] == victim:
                    head = None
            continue
        else:
            continue
        for c in changed:
            versions[c] = _version(next(seq))
        cp_id = str(uuid6(clock_seq=1))
        cp = empty_checkpoint()
        cp["id"] = cp_id
        cp["channel_values"] = dict(values)
        cp["channel_versions"] = dict(versions)
        cp["versions_seen"] = {}
        config = head or {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        md = {"source": "loop", "step": 0, "run_id": f"run-{cp_id}"}
        head = saver.put(config, cp, md, {c: versions[c] for c in changed})
        model[cp_id] = (head, {k: v for k, v in values.items() if k in versions})
    saver.codec.chunks.clear()
    saver.codec.states.clear()
    saver.codec.manifests.clear()
    for key, (config, expected) in model.items():
        got = saver.get_tuple(config)
        assert got is not None, key
        assert got.checkpoint["channel_values"] == expected, key
    for thread in threads:
        saver.delete_thread(thread)
    assert all(n == 0 for n in _counts(saver).values())

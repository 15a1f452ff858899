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


def _saver(kind: str, fanout: int = 2, **options):
    if kind == "memory":
        saver = InMemorySaver(**options)
    else:
        saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False), **options)
        saver.setup()
    saver.codec.fanout = fanout  # two-level manifests after 2 segments
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
    if kind == "memory":
        tags = {blob.tag for blob in saver.executor.blobs.values()}
    else:
        tags = {r[0] for r in saver.conn.execute("SELECT DISTINCT tag FROM tl_blobs")}
    assert {"threadloom.manifest", "threadloom.manifest2"} <= tags  # both manifest levels used
    saver.delete_thread("t")
    assert all(n == 0 for n in _counts(saver).values())


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


class History:
    """A saver driven like the runtime, next to a plain-dict model of what it must hold."""

    def __init__(self, saver) -> None:
        self.saver = saver
        self.model: dict[str, tuple[dict, dict]] = {}  # key -> (config, values)
        self.head = None
        self.values: dict = {"messages": [], "small": 0}
        self.versions: dict = {}
        self.seq = itertools.count(1)
        self.threads = ["t"]

    def change(self, op: str, arg: int) -> list[str]:
        v = self.values
        if op == "append":
            extra = [f"m{next(self.seq)}-" + "x" * 30 for _ in range(arg)]
            self.values = {**v, "messages": v["messages"] + extra}
            return ["messages"]
        if op == "drop_first":
            self.values = {**v, "messages": v["messages"][1:]}
            return ["messages"]
        if op == "small":
            self.values = {**v, "small": arg}
            return ["small"]
        self.values = {**v, "big": {"blob": "b" * 300, "n": arg}}
        return ["big"]

    def put(self, changed: list[str]) -> None:
        for c in changed:
            self.versions[c] = _version(next(self.seq))
        cp = empty_checkpoint()
        cp["id"] = cp_id = str(uuid6(clock_seq=1))
        cp["channel_values"] = dict(self.values)
        cp["channel_versions"] = dict(self.versions)
        cp["versions_seen"] = {}
        config = self.head or {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        md = {"source": "loop", "step": 0, "run_id": f"run-{cp_id}"}
        self.head = self.saver.put(config, cp, md, {c: self.versions[c] for c in changed})
        kept = {k: x for k, x in self.values.items() if k in self.versions}
        self.model[cp_id] = (self.head, kept)

    def goto(self, cid: str) -> None:
        self.head = self.model[cid][0]
        tup = self.saver.get_tuple(self.head)
        self.values = {"messages": [], **tup.checkpoint["channel_values"]}
        self.versions = dict(tup.checkpoint["channel_versions"])

    def copy(self) -> None:
        target = f"copy{len(self.threads)}"
        self.saver.copy_thread("t", target)
        self.threads.append(target)
        for cid, (config, vals) in list(self.model.items()):
            if config["configurable"]["thread_id"] == "t":
                conf = {**config["configurable"], "thread_id": target}
                self.model[f"{target}/{cid}"] = ({"configurable": conf}, vals)

    def forget(self, keys: list[str]) -> None:
        for key in keys:
            self.model.pop(key, None)
        if self.head is not None and self.head["configurable"]["checkpoint_id"] not in self.model:
            self.head = None

    def run(self, op: str, arg: int) -> None:
        own = sorted(c for c in self.model if "/" not in c)
        if op in ("append", "drop_first", "small", "big"):
            self.put(self.change(op, arg))
        elif op in ("fork", "reload") and own:
            self.goto(own[arg % len(own)] if op == "fork" else own[-1])
        elif op == "copy" and own:
            self.copy()
        elif op == "prune" and own:
            self.saver.prune(["t"], strategy="keep_last_n", keep_last=arg)
            self.forget(own[:-arg])
        elif op == "delete_runs" and own:
            victim = own[arg % len(own)]
            self.saver.delete_for_runs([f"run-{victim}"])  # copies carry the run id too
            self.forget([k for k in self.model if k.split("/")[-1] == victim])


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(script=ops)
def test_random_histories_read_back_exactly(kind, script) -> None:
    history = History(_saver(kind, compact_every=3, keyframe_every=3))
    for op, arg in script:
        history.run(op, arg)
    saver = history.saver
    saver.codec.chunks.clear()
    saver.codec.states.clear()
    saver.codec.manifests.clear()
    for key, (config, expected) in history.model.items():
        got = saver.get_tuple(config)
        assert got is not None, key
        assert got.checkpoint["channel_values"] == expected, key
    for thread in history.threads:
        saver.delete_thread(thread)
    assert all(n == 0 for n in _counts(saver).values())

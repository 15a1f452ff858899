"""``tl_blobs.refs`` stays exact through the SQLite saver's public calls.

Every stored reference is one hash occurrence in a ref row (``tl_refs.hashes``),
a task's writes row (``tl_writes.hashes``) or a stored manifest's ``children``;
a blob's ``refs`` must equal the number of those occurrences, and a blob
nothing references must be gone. A count that is too high leaks the blob
forever; one too low deletes it while a checkpoint still reads it. Each test
drives ``put``/``put_writes``/``delete_thread``/``prune``/``copy_thread``
and checks the counts against the rows after every step (:func:`_exact`), and
reads the values back.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.sqlite import SqliteSaver
from threadloom.checkpoint.storage.ops import HASH_SIZE

BIG = "0123456789abcdef" * 40  # ~640 bytes: stored as a blob, not inline


def _big(tag: str) -> str:
    return f"{tag}:{BIG}"


def _split(hashes: bytes) -> list[bytes]:
    return [hashes[i : i + HASH_SIZE] for i in range(0, len(hashes), HASH_SIZE)]


def _held(saver: SqliteSaver) -> Counter[bytes]:
    """Hash occurrences in every row that holds a reference."""
    held: Counter[bytes] = Counter()
    conn = saver.conn
    for table in ("tl_refs", "tl_writes"):
        for (hashes,) in conn.execute(f"SELECT hashes FROM {table}"):
            held.update(_split(bytes(hashes)))
    for (children,) in conn.execute("SELECT children FROM tl_blobs"):
        held.update(_split(bytes(children)))
    return held


def _exact(saver: SqliteSaver) -> dict[bytes, int]:
    """Assert every blob's count equals its references and no blob is
    unreferenced or missing; returns the counts."""
    counts = {bytes(h): n for h, n in saver.conn.execute("SELECT hash, refs FROM tl_blobs")}
    held = _held(saver)
    assert counts == dict(held), {h.hex()[:8]: (counts.get(h), held.get(h)) for h in counts | held}
    return counts


class Chain:
    """Puts on one thread, each a child of the previous one."""

    def __init__(self, saver: SqliteSaver, thread: str) -> None:
        self.saver, self.thread = saver, thread
        self.config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        self.versions: dict[str, Any] = {}
        self.last: tuple[Any, ...] = ()

    def put(self, values: dict[str, Any]) -> dict[str, Any]:
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        new = {ch: self.saver.get_next_version(self.versions.get(ch), None) for ch in values}
        self.versions.update(new)
        cp["channel_values"] = dict(values)
        cp["channel_versions"] = dict(self.versions)
        meta = {"source": "loop", "step": len(self.versions), "parents": {}}
        self.last = (self.config, cp, meta, new)
        self.config = self.saver.put(self.config, cp, meta, new)
        return self.config

    def again(self, **values: Any) -> None:
        """The last put once more, on a new saver (no codec memory of it),
        with ``values`` replacing channel values (same ids and versions)."""
        config, cp, meta, new = self.last
        cp = {**cp, "channel_values": {**cp["channel_values"], **values}}
        with SqliteSaver(self.saver.conn) as fresh:
            fresh.put(config, cp, meta, new)


def _values(saver: SqliteSaver, config: dict[str, Any]) -> dict[str, Any]:
    tup = saver.get_tuple(config)
    assert tup is not None
    return tup.checkpoint["channel_values"]


@pytest.fixture
def saver():
    with SqliteSaver.from_conn_string(":memory:") as s:
        yield s


def test_new_blobs_hold_their_count(saver) -> None:
    chain = Chain(saver, "a")
    config = chain.put({"x": _big("x1"), "y": _big("y1"), "z": _big("x1")})
    counts = _exact(saver)
    assert sorted(counts.values()) == [1, 2]  # x and z share one blob
    chain.put({"x": _big("x2")})
    assert sorted(_exact(saver).values()) == [1, 1, 2]
    assert _values(saver, config)["z"] == _big("x1")


def test_a_value_stored_by_another_thread_gains_references(saver) -> None:
    Chain(saver, "a").put({"x": _big("shared"), "y": _big("a-only")})
    before = _exact(saver)
    b = Chain(saver, "b")
    config = b.put({"x": _big("shared"), "w": _big("shared")})  # deduplicated twice
    after = _exact(saver)
    assert len(after) == len(before)  # no second copy
    assert sorted(after.values()) == [1, 3]
    assert _values(saver, config) == {"x": _big("shared"), "w": _big("shared")}


def test_the_same_checkpoint_put_twice_adds_nothing(saver) -> None:
    chain = Chain(saver, "a")
    chain.put({"x": _big("x0")})
    first = chain.put({"x": _big("x1"), "y": _big("y1")})
    counts = _exact(saver)
    assert sorted(counts.values()) == [1, 1, 1]
    # the same checkpoint again: its ref rows exist (first write wins)
    saver.put(*chain.last)
    assert _exact(saver) == counts
    chain.again()  # from a saver that does not remember sending the blobs
    assert _exact(saver) == counts
    # ref rows that already exist, now for other values: ignored, and the new
    # values' blobs (held by nothing) are not kept
    chain.again(x=_big("other"), y=_big("x0"))
    assert _exact(saver) == counts
    assert _values(saver, first) == {"x": _big("x1"), "y": _big("y1")}


def test_put_writes_merged_twice(saver) -> None:
    config = Chain(saver, "a").put({"x": _big("x1")})
    saver.put_writes(config, [("x", _big("w1")), ("y", _big("x1"))], "task-1")
    counts = _exact(saver)
    # the same task again (merged into its row: no double count), then more
    saver.put_writes(config, [("x", _big("w1")), ("y", _big("x1"))], "task-1")
    assert _exact(saver) == counts
    saver.put_writes(config, [("z", _big("w2"))], "task-1")
    saver.put_writes(config, [("z", _big("w1"))], "task-2")
    counts = _exact(saver)
    assert counts[max(counts, key=counts.get)] >= 2
    pending = sorted(w[1:] for w in saver.get_tuple(config).pending_writes)
    assert ("x", _big("w1")) in pending and ("z", _big("w1")) in pending


def test_lists_and_manifests_count_their_segments(saver) -> None:
    chain = Chain(saver, "a")
    items: list[str] = []
    for i in range(6):  # an append-only list: segments shared between versions
        items = [*items, _big(f"m{i}")]
        config = chain.put({"messages": items})
        _exact(saver)
    assert _values(saver, config)["messages"] == items
    saver.copy_thread("a", "b")
    _exact(saver)
    saver.delete_thread("a")
    _exact(saver)
    assert _values(saver, {"configurable": {"thread_id": "b"}})["messages"] == items


def test_delete_and_prune_drop_every_blob(saver) -> None:
    a, b = Chain(saver, "a"), Chain(saver, "b")
    for i in range(4):
        config_a = a.put({"x": _big(f"x{i}"), "s": _big("shared")})
        saver.put_writes(config_a, [("x", _big(f"w{i}"))], f"task-{i}")
        b.put({"y": _big(f"y{i}"), "s": _big("shared")})
        _exact(saver)
    report = saver.prune(["a"], strategy="keep_latest")
    assert report is not None
    _exact(saver)
    assert _values(saver, {"configurable": {"thread_id": "a"}})["x"] == _big("x3")
    saver.delete_thread("a")
    counts = _exact(saver)
    assert counts  # b still holds its values (and the shared one)
    assert _values(saver, {"configurable": {"thread_id": "b"}})["s"] == _big("shared")
    saver.delete_thread("b")
    assert _exact(saver) == {}
    assert saver.conn.execute("SELECT count(*) FROM tl_blobs").fetchone() == (0,)

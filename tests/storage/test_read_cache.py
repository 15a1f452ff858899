"""Read-side caches: a re-read is served without storage lookups, yet never stale.

Memory savers with the read caches on (a database backend's setting) stand in
for database savers; two sharing one executor stand in for two processes
sharing a database: what one caches must not hide what the other rewrote.
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.flows import unique_version_key
from threadloom.checkpoint.storage.rows import version_key


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _saver() -> InMemorySaver:
    saver = InMemorySaver()
    saver.codec.cache_reads = True
    return saver


def _version(n: int) -> str:
    """A version in the runtime's form (counter + random fraction), fixed here
    so a test can write the same key twice; only such versions are cached."""
    return f"{n:032}.0.8147236863931789"


def _put(saver: InMemorySaver, thread_id: str, values: dict[str, Any], version: int | str) -> Any:
    if type(version) is int:
        version = _version(version)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict.fromkeys(values, version)
    saver.put(_config(thread_id), checkpoint, {"step": 1}, dict.fromkeys(values, version))
    return checkpoint["id"]


class CountingExecutor:
    """Counts the operations a flow sends to the wrapped executor."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seen = inner, []

    def transaction(self, write: bool) -> Any:
        return self.inner.transaction(write)

    def execute(self, op: ops.Op) -> Any:
        self.seen.append(type(op).__name__)
        return self.inner.execute(op)


def test_reread_needs_only_the_checkpoint_and_writes() -> None:
    saver = _saver()
    big = {"text": "x" * 500, "n": 1}
    cid = _put(saver, "t", {"a": big, "b": ["m" * 300]}, 1)
    saver.put_writes(_config("t", cid), [("a", {"w": "y" * 300})], "task")
    first = saver.get_tuple(_config("t"))
    counting = CountingExecutor(saver.executor)
    saver.executor = counting  # type: ignore[assignment]
    again = saver.get_tuple(_config("t"))
    assert counting.seen == ["GetCheckpoint", "LoadWrites"]
    assert again.checkpoint == first.checkpoint and again.pending_writes == first.pending_writes
    again.checkpoint["channel_values"]["a"]["n"] = 99  # callers get fresh objects
    assert saver.get_tuple(_config("t")).checkpoint["channel_values"]["a"]["n"] == 1


def test_cached_ref_whose_blobs_vanished_is_read_again() -> None:
    reader, writer = _saver(), _saver()
    writer.executor = reader.executor  # one store, two processes' caches
    _put(writer, "t", {"log": ["old " * 40, "older " * 40]}, 1)
    assert reader.get_tuple(_config("t")).checkpoint["channel_values"]["log"][0] == "old " * 40
    writer.delete_thread("t")
    # the same (channel, version) key rewritten with other content; the
    # reader's cached ref row names chunks that no longer exist
    _put(writer, "t", {"log": ["new " * 40]}, 1)
    reader.codec.chunks.clear()
    reader.codec.blob_cache.clear()
    got = reader.get_tuple(_config("t"))
    assert got.checkpoint["channel_values"]["log"] == ["new " * 40]


def test_deterministic_versions_are_not_cached() -> None:
    """Another process may delete a thread and rewrite it with the same
    deterministic versions ("1", "2", ...) and values whose blobs all exist:
    a cached ref row would then silently name the old value."""
    reader, writer = _saver(), _saver()
    writer.executor = reader.executor
    _put(writer, "t", {"big": "OLD " * 100}, "1")
    assert reader.get_tuple(_config("t")).checkpoint["channel_values"]["big"] == "OLD " * 100
    writer.delete_thread("t")
    _put(writer, "t", {"keep": "OLD " * 100}, "1")  # the old value's blob stays alive
    _put(writer, "t", {"big": "NEW " * 100}, "1")
    got = reader.get_tuple(_config("t"))
    assert got.checkpoint["channel_values"]["big"] == "NEW " * 100


def test_unique_version_keys() -> None:
    assert unique_version_key(version_key(_version(3)))
    assert unique_version_key(version_key(InMemorySaver().get_next_version(None, None)))
    for deterministic in ("1", 1, 2.0, f"{1:032}.0", f"{1:032}.0.0000000000000000"):
        assert not unique_version_key(version_key(deterministic))


def test_memory_saver_does_not_cache_reads() -> None:
    saver = InMemorySaver()
    _put(saver, "t", {"a": {"text": "x" * 500}}, 1)
    saver.get_tuple(_config("t"))
    assert not len(saver.codec.ref_cache) and not len(saver.codec.blob_cache)


def test_retention_drops_cached_rows_and_bytes() -> None:
    saver = _saver()
    _put(saver, "t", {"a": {"text": "x" * 500}}, 1)
    saver.get_tuple(_config("t"))
    assert len(saver.codec.ref_cache) and len(saver.codec.blob_cache)
    saver.delete_thread("t")
    assert not len(saver.codec.ref_cache) and not len(saver.codec.blob_cache)
    assert saver.get_tuple(_config("t")) is None


def test_rewritten_record_is_decoded_again() -> None:
    saver = _saver()
    cid = _put(saver, "t", {"a": "small"}, 1)
    state = saver.codec.states.get(("t", "", cid))
    assert state is not None and state.data is not None
    row = saver.executor.checkpoints[("t", "")][cid]
    # another writer replaced the record (same id): the cached state no longer matches
    other = _saver()
    other.executor = saver.executor
    checkpoint = empty_checkpoint()
    checkpoint["id"] = cid
    checkpoint["channel_values"] = {"a": "changed"}
    checkpoint["channel_versions"] = {"a": 2}
    other.put(_config("t"), checkpoint, {}, {"a": 2})
    assert saver.executor.checkpoints[("t", "")][cid].data != row.data
    got = saver.get_tuple(_config("t", cid))
    assert got.checkpoint["channel_values"] == {"a": "changed"}

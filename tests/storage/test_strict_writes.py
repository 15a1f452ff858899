"""put_writes without a read: a task's first ``put_writes`` sends one strict
``SaveWrites`` (the executor checks no row exists and counts references) and
stores exactly what the read-merge-write path stores."""

from __future__ import annotations

from typing import Any

import ormsgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.base import empty_checkpoint, uuid6
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.storage import ops
from threadloom.checkpoint.storage.ops import WriteRow
from threadloom.checkpoint.storage.writes import merge_writes
from threadloom.constants import ERROR, INTERRUPT

BIG = "pending write " * 20
_ID = str(uuid6(clock_seq=1))


def _spy(saver: InMemorySaver) -> list[Any]:
    seen: list[Any] = []
    execute = saver.executor.execute

    def spy(op: Any) -> Any:
        seen.append(op)
        return execute(op)

    saver.executor.execute = spy  # type: ignore[method-assign]
    return seen


def _checkpoint(saver: InMemorySaver, thread: str = "t") -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["id"] = _ID
    return saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {}, {})


def _store(saver: InMemorySaver) -> tuple[Any, Any]:
    ex = saver.executor
    writes = {k: dict(v) for k, v in ex.writes.items()}
    return writes, {h: (b, ex.counts[h]) for h, b in ex.blobs.items()}


def test_first_put_writes_is_one_strict_save() -> None:
    saver = InMemorySaver()
    config = _checkpoint(saver)
    seen = _spy(saver)
    saver.put_writes(config, [("a", BIG), ("b", 1), ("c", BIG)], "task", "~p")
    assert [type(op) for op in seen] == [ops.SaveWrites]
    assert seen[0].strict and seen[0].add_refs and seen[0].expected == (None,)
    ((blob, refs),) = [(b, saver.executor.counts[h]) for h, b in saver.executor.blobs.items()]
    assert refs == 2  # one reference per occurrence in the row
    seen.clear()
    saver.put_writes(config, [(ERROR, "boom")], "task", "~p")  # known row: read, merge
    assert [type(op) for op in seen][:2] == [ops.LoadWrites, ops.SaveWrites]
    assert not seen[1].strict


def test_row_written_elsewhere_is_merged_not_replaced() -> None:
    first, second = InMemorySaver(), InMemorySaver()
    second.executor = first.executor  # two processes, one store
    config = _checkpoint(first)
    first.put_writes(config, [("a", BIG)], "task", "~p")
    seen = _spy(second)
    second.put_writes(config, [("a", "other " + BIG), ("b", 2)], "task", "~p")
    kinds = [type(op) for op in seen]
    assert kinds[:3] == [ops.SaveWrites, ops.LoadWrites, ops.SaveWrites]
    got = first.get_tuple(config)
    assert [(c, v) for _, c, v in got.pending_writes] == [("a", BIG), ("b", 2)]
    first.delete_thread("t")
    assert first.executor.blobs == {} == first.executor.counts and first.executor.writes == {}


writes_lists = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "messages", ERROR, INTERRUPT]),
        st.one_of(st.integers(), st.text(max_size=3), st.just(BIG), st.just([BIG, BIG])),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["t1", "t2"]), writes_lists), max_size=5))
def test_strict_path_stores_what_the_read_path_stores(calls) -> None:
    strict, plain = InMemorySaver(), InMemorySaver()
    plain.codec.strict_writes = plain.codec.writes_add_refs = False
    for saver in (strict, plain):
        config = _checkpoint(saver)
        for task, writes in calls:
            saver.put_writes(config, writes, task, "~p")
    assert _store(strict) == _store(plain)
    assert strict.get_tuple(config).pending_writes == plain.get_tuple(config).pending_writes


@settings(max_examples=100, deadline=None)
@given(
    writes=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "messages", INTERRUPT]),
            st.one_of(st.integers(), st.text(max_size=3), st.just(BIG)),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_first_writes_shortcut_merges_like_an_empty_row(writes) -> None:
    """A task's first writes skip the merge (entries are in index order already)."""
    serde = InMemorySaver().serde
    key = ("t", "", _ID, "task")
    empty = WriteRow(*key, "", ormsgpack.packb([]), b"")
    assert merge_writes(serde, 64, None, key, "~p", writes) == merge_writes(
        serde, 64, empty, key, "~p", writes
    )

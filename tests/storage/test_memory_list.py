"""The memory executor's bisecting ``list`` of one thread equals the full scan."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.checkpoint.memory.executor import MemoryExecutor
from threadloom.checkpoint.storage import ops as o

ids = st.lists(st.text("0123456789abcdef", min_size=4, max_size=4), unique=True, max_size=25)


def _row(thread: str, cid: str, step: int) -> o.CheckpointRow:
    return o.CheckpointRow(thread, "", cid, None, "tl1", b"", f'{{"step": {step}}}', None)


@settings(max_examples=120, deadline=None)
@given(
    mine=ids,
    other=ids,
    before=st.none() | st.text("0123456789abcdef", min_size=4, max_size=4),
    after=st.none() | st.text("0123456789abcdef", min_size=4, max_size=4),
    after_thread=st.sampled_from(["a", "t", "z"]),
    limit=st.none() | st.integers(0, 30),
    only_even=st.booleans(),
)
def test_one_thread_matches_the_scan(
    mine, other, before, after, after_thread, limit, only_even
) -> None:
    ex = MemoryExecutor()
    for i, cid in enumerate(mine):  # any insertion order (insort keeps ids sorted)
        ex._put_row(_row("t", cid, i % 2))
    for cid in other:
        ex._put_row(_row("u", cid, 0))
    pairs = (("step", "0"),) if only_even else ()
    cursor = (after, after_thread, "") if after is not None else None
    op = o.ListCheckpoints("t", "", pairs, before, cursor, limit)
    fast = ex._list(op)
    scan = ex._list(o.ListCheckpoints(None, "", pairs, before, cursor, None))
    expected = [r for r in scan if r.thread_id == "t"][:limit]
    assert fast == expected
    if mine:
        latest = ex._get(o.GetCheckpoint("t", "", None))
        assert latest is not None and latest.checkpoint_id == max(mine)


@settings(max_examples=60, deadline=None)
@given(mine=ids.filter(len), doomed=st.sets(st.integers(0, 24)))
def test_order_follows_deletes(mine, doomed) -> None:
    ex = MemoryExecutor()
    for cid in mine:
        ex._put_row(_row("t", cid, 0))
    gone = tuple(cid for i, cid in enumerate(mine) if i in doomed)
    ex._delete_checkpoints(o.DeleteCheckpoints("t", "", gone))
    left = sorted(set(mine) - set(gone), reverse=True)
    listed = ex._list(o.ListCheckpoints("t", "", (), None, None, None))
    assert [r.checkpoint_id for r in listed] == left
    latest = ex._get(o.GetCheckpoint("t", "", None))
    assert (latest.checkpoint_id if latest else None) == (left[0] if left else None)

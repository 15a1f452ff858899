"""The fence is atomic with the write, not a check-then-write.

SQLite and Postgres run the check inside the write transaction (the SQLite
write lock / a Postgres row lock keep a takeover out until commit). Redis has
no multi-command transactions here, so the check rides inside the very Lua
script that stores the checkpoint: this test takes the lease over *between*
the flow's check and its save, and the save must still refuse.
"""

from __future__ import annotations

import pytest

from tests.concurrency.backends import make_spec, open_saver
from tests.concurrency.graphs import chain
from threadloom.checkpoint.ids import uuid6_str
from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.lease import FencedSaver, Lease, lease_backend
from threadloom.errors import LeaseLostError


class StolenAfterCheck(FencedSaver):
    """Runs the fence check, then lets another client take the lease over."""

    thief: Lease

    def _fenced(self, flow):
        yield from lo.check_flow(self.lease.thread_id, self.lease.token, 60_000)
        self.thief.saver._run(lo.release_flow(self.lease.thread_id, self.lease.token), True)
        assert self.thief.try_acquire() is None
        return (yield from flow)


def _attempt(saver, other, write):
    """Take the lease (from whoever holds it), let a thief steal it mid-flow, write."""
    holder = saver._run(lo.read_flow("t"), True)
    if holder is not None:
        saver._run(lo.release_flow("t", holder.token), True)
    mine = Lease(saver, "t", "victim")
    assert mine.try_acquire() is None
    fenced = StolenAfterCheck(saver, mine)
    fenced.thief = Lease(other, "t", "thief")
    with pytest.raises(LeaseLostError):
        write(fenced)


def test_redis_lease_taken_between_check_and_save_writes_nothing(tmp_path, request):
    spec = make_spec("redis", str(tmp_path), request)
    with open_saver(spec) as saver, open_saver(spec) as other:
        lease_backend(saver)
        lease_backend(other)
        cfg = {"configurable": {"thread_id": "t"}}
        chain(2).compile(checkpointer=saver).invoke({"log": []}, cfg)
        ids = [c.checkpoint["id"] for c in saver.list(cfg)]
        latest = saver.get_tuple(cfg)

        fresh = dict(latest.checkpoint, id=uuid6_str())  # a new child of the latest
        _attempt(saver, other, lambda f: f.put(latest.config, fresh, {"step": 9}, {}))
        assert [c.checkpoint["id"] for c in saver.list(cfg)] == ids
        _attempt(saver, other, lambda f: f.put_writes(latest.config, [("log", ["z"])], "task-z"))
        pending = saver.get_tuple(cfg).pending_writes or []
        assert not any(w[0] == "task-z" for w in pending)

"""The cross-thread index ``{prefix}:threads``: which threads the operator calls visit.

The index is a SET with no expiry, written next to (not inside) the per-thread
scripts: a put adds its thread, a delete that empties a thread removes it. A
thread that *expires* (``ttl=``) removes nothing, so before the calls that
span threads (``list(None)``, ``stats()``, ``delete_for_runs``) read the index
they check each member with :data:`REAP` (one script in the thread's slot) and
remove the dead ones. The check and the removal are in different slots, so
they cannot be one atomic step: the removed members are checked once more
after the SREM and any that a concurrent put brought back are added again. A
live thread is therefore never left out of the index; at worst a dead one
stays until the next such call.

Why not a ZSET scored by last use, trimmed by ``ttl``: reads re-arm a thread's
TTL too, so every read would have to write the index, and stores written by
earlier versions hold a SET under this key (a ZSET would need a migration).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.checkpoint.redis.fields import text

if TYPE_CHECKING:
    from threadloom.checkpoint.redis.executor import Plan, RedisPlanner

__all__ = ["REAP", "live_threads"]

# REAP: ARGV ttl -> 1 when the thread has a checkpoint or a write, else 0.
# A dead thread's keys that carry no expiry (left by versions whose ADJUST
# created the counts hash without one) get the saver's ttl, so they go too.
# They are unreachable, but only expired, not deleted: a put racing this
# script re-arms them as it would anyway.
REAP = """
if redis.call('EXISTS', ROW, IDS, W) > 0 then return 1 end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
    for i = 1, 8 do
        if redis.call('TTL', KEYS[i]) == -1 then redis.call('EXPIRE', KEYS[i], ttl) end
    end
end
return 0
"""


def live_threads(planner: RedisPlanner) -> Plan:
    """Thread ids of the index whose thread still exists, newest id first;
    members whose thread expired or was deleted are removed from the index."""
    from threadloom.checkpoint.redis.executor import Call

    key = planner.layout.threads()
    (members,) = yield [Call(("SMEMBERS", key))]
    ids = sorted((text(m) for m in members), reverse=True)
    if not ids:
        return ids
    alive = yield [planner.lua("reap", t) for t in ids]
    dead = [t for t, a in zip(ids, alive) if not int(a)]
    if not dead:
        return ids
    # the SREM runs before the checks queued after it (pipelines keep order)
    again = yield [Call(("SREM", key, *dead)), *(planner.lua("reap", t) for t in dead)]
    back = {t for t, a in zip(dead, again[1:]) if int(a)}
    if back:  # a put recreated them between the two checks: keep them listed
        yield [Call(("SADD", key, *back))]
    return [t for t, a in zip(ids, alive) if int(a) or t in back]

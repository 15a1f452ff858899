"""Leases on Redis: one hash per thread (``{prefix:thread}:lease``) with a PX expiry.

The key shares the thread's hash tag, so a lease check and a checkpoint write
can run in ONE Lua script (Redis Cluster safe): :data:`FENCE` is prepended to
the saver's ``save``/``writes`` scripts when the flow carries a token, and
raises ``THREADLOOM_LEASE_LOST`` before anything is written.

Retention runs as several scripts, not one transaction, so its lease check
(``ReadLease`` in a writing flow) *takes* a short guard lease (holder
``"retention"``) that the saver drops when the flow ends: a run acquiring the
thread meanwhile is refused like by any holder and then sees the finished result.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from threadloom.checkpoint.lease import ops as lo

__all__ = [
    "FENCE",
    "FENCED",
    "FENCE_CHECK",
    "FENCE_TAKE",
    "LOST_MARKER",
    "fenced",
    "fenced_scripts",
    "handlers",
    "lease_key",
    "register_lease_plans",
    "release_guards",
]

LOST_MARKER = "THREADLOOM_LEASE_LOST"

# FENCE in two parts: a script run once (redis/once.py) answers a re-send
# between them, before the lease check (its first run passed it)
FENCE_TAKE = """
local __lease_token = table.remove(ARGV)
local __lease_key = table.remove(KEYS)
"""
FENCE_CHECK = f"""if redis.call('HGET', __lease_key, 'token') ~= __lease_token then
    return redis.error_reply('{LOST_MARKER}')
end
"""
FENCE = FENCE_TAKE + FENCE_CHECK

_SCRIPT = """
local k, cmd = KEYS[1], ARGV[1]
local cur = redis.call('HMGET', k, 'holder', 'token', 'stop')
local function info()
    local h = redis.call('HMGET', k, 'holder', 'token', 'stop')
    return {1, h[1], h[2], redis.call('PTTL', k), h[3]}
end
-- KEYS[2..9], when given: the thread's eight keys (a run's lease, not a guard)
local function keep(ms)
    ms = tonumber(ms)
    for i = 2, #KEYS do
        local left = redis.call('PTTL', KEYS[i])
        if left >= 0 and left < ms then redis.call('PEXPIRE', KEYS[i], ms) end
    end
end
local function rearm(ttl)
    if #KEYS < 9 then return end
    ttl = tonumber(ttl or '0')
    local own = redis.call('HGET', KEYS[9], 'ttl')  -- the thread's own TTL (keys.py)
    if own then ttl = tonumber(own) end
    if ttl > 0 then
        for i = 2, 9 do redis.call('EXPIRE', KEYS[i], ttl) end
    end
end
if cmd == 'acquire' then
    if cur[2] and cur[2] ~= ARGV[3] and cur[2] ~= ARGV[5] then return info() end
    -- already ours: an acquire re-sent after a lost reply (redis/once.py) keeps
    -- a stop request another client made meanwhile
    if cur[2] ~= ARGV[3] then
        redis.call('DEL', k)
        redis.call('HSET', k, 'holder', ARGV[2], 'token', ARGV[3], 'stop', '')
    end
    redis.call('PEXPIRE', k, ARGV[4])
    keep(ARGV[4])
    return {0}
elseif cmd == 'renew' then
    if cur[2] ~= ARGV[2] then return {0} end
    redis.call('PEXPIRE', k, ARGV[3])
    keep(ARGV[3])
    return info()
elseif cmd == 'release' then
    if cur[2] == ARGV[2] then
        redis.call('DEL', k)
        rearm(ARGV[3])
    end
    return {0}
elseif cmd == 'stop' then
    if not cur[2] then return {0} end
    if cur[3] == '' then redis.call('HSET', k, 'stop', ARGV[2]) end
    return info()
elseif cmd == 'unstop' then
    if not cur[2] then return {0} end
    if cur[3] == ARGV[2] then redis.call('HSET', k, 'stop', '') end
    return info()
elseif cmd == 'check' then
    if cur[2] ~= ARGV[2] then return {0} end
    redis.call('PEXPIRE', k, ARGV[3])
    keep(ARGV[3])
    return {1, cur[3]}
end
if not cur[2] then return {0} end
return info()
"""

Plan = Generator[list[Any], list[Any], Any]

GUARD_HOLDER = "retention"  # what a run refused during retention is told holds the thread
GUARD_TTL_MS = 120_000  # a guard outlives a crashed retention call at most this long


def lease_key(planner: Any, thread_id: str) -> str:
    return planner.key(thread_id, "lease")


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _info(reply: list[Any]) -> lo.LeaseInfo | None:
    if not reply or int(reply[0]) == 0:
        return None
    return lo.LeaseInfo(_text(reply[1]), _text(reply[2]), int(reply[3]), _text(reply[4] or b""))


def handlers(call_cls: Any) -> dict[str, Any]:
    """``_<OpName>`` -> plan method for :class:`RedisPlanner` (``call_cls`` = its Call)."""

    def run(planner: Any, thread_id: str, *args: Any, keep: bool = False) -> Plan:
        """The lease script; ``keep``: with the thread's keys, which a run's lease
        keeps alive as long as itself (acquire, renew, check) and re-arms to the
        thread's TTL when released: a thread never expires mid-run."""
        key = lease_key(planner, thread_id)
        keys = (key, *planner.layout.thread_keys(thread_id)) if keep else (key,)
        (reply,) = yield [call_cls(("EVAL", _SCRIPT, len(keys), *keys, *args))]
        return reply

    def acquire(self: Any, op: lo.AcquireLease, scope: Any) -> Plan:
        args = ("acquire", op.holder, op.token, op.ttl_ms, op.steal)
        reply = yield from run(self, op.thread_id, *args, keep=True)
        return _info(reply)

    def renew(self: Any, op: lo.RenewLease, scope: Any) -> Plan:
        reply = yield from run(self, op.thread_id, "renew", op.token, op.ttl_ms, keep=True)
        return _info(reply)

    def release(self: Any, op: lo.ReleaseLease, scope: Any) -> Plan:
        yield from run(self, op.thread_id, "release", op.token, self.ttl, keep=True)

    def request_stop(self: Any, op: lo.RequestStop, scope: Any) -> Plan:
        cmd = "unstop" if op.withdraw else "stop"
        return _info((yield from run(self, op.thread_id, cmd, op.mode)))

    def check(self: Any, op: lo.CheckLease, scope: Any) -> Plan:
        scope.lease = (lease_key(self, op.thread_id), op.token)  # fences the writes that follow
        reply = yield from run(self, op.thread_id, "check", op.token, op.ttl_ms, keep=True)
        return _text(reply[1] or b"") if int(reply[0]) else None

    def read(self: Any, op: lo.ReadLease, scope: Any) -> Plan:
        if not scope.write:
            return _info((yield from run(self, op.thread_id, "read")))
        return (yield from guard(self, op.thread_id, scope))

    def guard(self: Any, thread_id: str, scope: Any) -> Plan:
        """A writing flow's lease check (retention): take a short guard lease
        instead of only reading, so a run cannot acquire the thread between this
        check and the flow's last script. Released when the flow's scope ends."""
        from threadloom.checkpoint.lease.lease import new_token  # lease.py imports this module

        key = lease_key(self, thread_id)
        if key in scope.guards:
            return None
        token = new_token()
        reply = yield from run(self, thread_id, "acquire", GUARD_HOLDER, token, GUARD_TTL_MS, "")
        info = _info(reply)
        if info is None:
            scope.guards[key] = token
        return info

    return {
        "_AcquireLease": acquire,
        "_RenewLease": renew,
        "_ReleaseLease": release,
        "_RequestStop": request_stop,
        "_CheckLease": check,
        "_ReadLease": read,
    }


def release_guards(guards: dict[str, str], call_cls: Any) -> list[Any]:
    """The calls dropping a flow's guard leases (lease key -> token), each only
    while it is still ours."""
    return [call_cls(("EVAL", _SCRIPT, 1, key, "release", token)) for key, token in guards.items()]


FENCED = ("save", "writes")  # the scripts that store checkpoints and task writes


def fenced_scripts(scripts: dict[str, str]) -> dict[str, str]:
    """``<name>:fenced`` variants: the lease check, then the unchanged script."""
    return {f"{name}:fenced": FENCE + scripts[name] for name in FENCED}


def fenced(call: Any, lease: tuple[str, str] | None, call_cls: Any) -> Any:
    """``call`` as its fenced variant when the flow holds a lease (``scope.lease``):
    the lease key joins KEYS (last), the token joins ARGV (last)."""
    if lease is None or call.script.partition(":")[0] not in FENCED:  # also "save:once"
        return call
    key, token = lease
    return call_cls((*call.args, token), f"{call.script}:fenced", (*call.keys, key))


def register_lease_plans(planner_cls: Any, call_cls: Any) -> None:
    """Give the Redis planner its ``_AcquireLease``... plan methods."""
    for name, plan in handlers(call_cls).items():
        setattr(planner_cls, name, plan)

"""A script re-sent after a lost reply runs once: its op key answers the re-send.

redis-py retries a command when the connection fails (``redis.Redis(...)``
does by default, and so do the clients ``from_conn_string`` builds). A
connection can fail *after* the server ran the script and before its reply
arrived; the retry then sends the same EVALSHA, with the same arguments, again.
Several scripts are not idempotent: ``adjust`` run twice applies its refcount
deltas twice (a decrement twice lets ``drop`` delete a blob another checkpoint
still uses), ``insert`` takes its references twice, and ``save``, ``writes``,
``drop``, ``delete``, ``delete_refs`` answer a re-send differently (nothing
new, nothing inserted, nothing dropped), so the flow that reads the answer
skips counts it owes or re-merges a row it wrote itself. A re-send can also
come after another client's command (a put, a prune), which it must not undo.

So each call of a script in :data:`ONCE` carries an op key made once per
call, ``{prefix:thread}:op:<uuid4 hex>`` (the thread's hash tag: one cluster
slot with the thread's keys), as the last of its KEYS. The script first reads
it: present, the script already ran, and it returns the reply stored there,
changing nothing. Otherwise it runs and, in the same atomic script, stores
its reply there (``cmsgpack``) with a :data:`OP_TTL_MS` expiry: far longer
than redis-py's retries take, short enough that op keys do not pile up
(a few per step; they expire by themselves, also after the thread is deleted).

The id is in the key (KEYS), not only in ARGV, because Redis Cluster requires
every key a script touches to be declared.
"""

from __future__ import annotations

import uuid
from typing import Any

from threadloom.checkpoint.lease.redis import FENCE_CHECK, FENCE_TAKE, FENCED

__all__ = ["ONCE", "OP_TTL_MS", "once", "once_scripts"]

ONCE = frozenset({"save", "writes", "insert", "adjust", "drop", "delete", "delete_refs", "set_ttl"})
"""The scripts whose second run is not a no-op. ``set_ttl`` re-applies the same
value, but re-sent after another client's ``delete_thread`` it would recreate the
deleted thread's ``wi`` key (with ``None``, one that never expires, and a new
thread reusing the id would keep that TTL). Read-only scripts and ``reap`` are
safe to run again."""

OP_TTL_MS = 300_000

_TAKE = """
local __op_key = table.remove(KEYS)
local __op_done = redis.call('GET', __op_key)
if __op_done then return cmsgpack.unpack(__op_done) end
"""


def _wrap(script: str) -> str:
    """``script`` as a function whose reply is stored under the op key."""
    return (
        "local function __op_body()\n"
        f"{script}\n"
        "end\n"
        "local __op_reply = __op_body()\n"
        f"redis.call('SET', __op_key, cmsgpack.pack(__op_reply), 'PX', {OP_TTL_MS})\n"
        "return __op_reply\n"
    )


def once_scripts(scripts: dict[str, str]) -> dict[str, str]:
    """``<name>:once`` for every script of :data:`ONCE`, and ``<name>:once:fenced``
    for the lease-fenced ones: the stored reply answers before the lease check
    (the first run passed it; the lease may have moved on since)."""
    out = {f"{name}:once": _TAKE + _wrap(scripts[name]) for name in ONCE}
    for name in FENCED:
        out[f"{name}:once:fenced"] = FENCE_TAKE + _TAKE + FENCE_CHECK + _wrap(scripts[name])
    return out


def once(call: Any, op_key_prefix: str) -> Any:
    """``call`` (a :class:`.executor.Call` of a script in :data:`ONCE`) with a new
    op key ``<op_key_prefix><uuid4 hex>`` as its last key; other calls unchanged.
    Built once per call: every re-send of the same call carries the same key."""
    if call.script not in ONCE:
        return call
    key = op_key_prefix + uuid.uuid4().hex
    return type(call)(call.args, f"{call.script}:once", (*call.keys, key))

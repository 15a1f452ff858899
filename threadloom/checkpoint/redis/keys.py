"""Redis key layout: every key of a thread lives in one cluster hash slot.

Each key starts with the hash tag ``{<prefix>:<thread>}``, so Redis Cluster (and
Valkey, and proxies that speak the cluster protocol) puts all of a thread's
keys in one slot, and a MULTI/EXEC or Lua script over them never raises
CROSSSLOT. The price is that blobs are content-addressed *per thread*: two
threads storing the same value store it twice, because a blob key shared
across threads would live in another slot than at least one of them.
Deduplication inside a thread (where nearly all repetition is: unchanged
channels, replayed forks, appended message lists) is kept.

Layout (``T`` = ``{prefix:thread}``; ``\\0`` separates parts of a member or field)::

    T:ck    ZSET   "ns\\0checkpoint_id", all score 0: latest of a namespace by lex order
    T:ids   ZSET   "checkpoint_id\\0ns": the thread's checkpoints newest first, all namespaces
    T:row   HASH   "ns\\0checkpoint_id" -> "parent_id\\0" + packed checkpoint row
    T:ref   HASH   "ns\\0channel\\0version" -> packed ref row
    T:blob  HASH   content hash -> packed blob (tag, data, children)
    T:rc    HASH   content hash -> references held (refs + manifests)
    T:w     HASH   "ns\\0checkpoint_id\\0task_id" -> packed pending writes of one task
    T:wi    HASH   "ns\\0checkpoint_id" -> its task ids joined by "\\1";
                   "ttl" -> the thread's own TTL (set_thread_ttl), if any: a field
                   with no "\\0", so no namespace/checkpoint id can name it

Eight keys per thread, whatever its length: a TTL refresh, a delete or a
copy touches a fixed, declared set of keys (every Lua script names all of
them in KEYS, as Redis Cluster requires).

Besides these, a write script leaves a short-lived op key ``T:op:<id>``
(STRING, expires within minutes): its stored reply, which answers the same
call re-sent after a lost reply (:mod:`.once`).

The only cross-thread key is ``{prefix}:threads``, a SET of thread ids, used
by the operator calls that span threads (``list(None)``, ``delete_for_runs``,
``stats()``). It lives in its own slot, is updated outside the per-thread
scripts, and may name a thread that expired or was deleted: those readers
remove such members first (:mod:`.index`), so the set does not grow with
every thread that ever expired.

A prefix may not contain ``:``: prefix ``a`` with thread ``b:c`` and prefix
``a:b`` with thread ``c`` would share the tag ``{a:b:c}`` (thread ids may hold
any character, so the first ``:`` must end the prefix).

Thread ids are escaped so no caller value can end the hash tag early or make
two different keys equal (``%``, ``{``, ``}`` become ``%25``, ``%7B``, ``%7D``).

Every write is one Lua script over the thread's eight keys: atomic, one round
trip, and (with ``ttl``) it re-arms the expiry of all eight keys, as do the
reads of a checkpoint of that thread (refresh on read); a listing across
threads reads with ``ttl`` 0, so it keeps no thread alive.
"""

from __future__ import annotations

from binascii import crc_hqx

from threadloom.checkpoint.lease.redis import fenced_scripts
from threadloom.checkpoint.redis.deletes import DELETE, DELETE_REFS, DROP
from threadloom.checkpoint.redis.index import REAP
from threadloom.checkpoint.redis.once import once_scripts
from threadloom.errors import ConfigError

__all__ = [
    "KeyLayout",
    "THREAD_PARTS",
    "key_slot",
    "escape",
    "unescape",
    "SCRIPTS",
]

CLUSTER_SLOTS = 16384
THREAD_PARTS = ("ck", "ids", "row", "ref", "blob", "rc", "w", "wi")


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster slot of ``key`` (CRC16/XMODEM of the hash tag, mod 16384)."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc_hqx(raw, 0) % CLUSTER_SLOTS


def escape(value: str) -> str:
    """Make ``value`` safe inside a hash tag and unambiguous inside a key."""
    return value.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def unescape(value: str) -> str:
    """Inverse of :func:`escape`."""
    return value.replace("%7D", "}").replace("%7B", "{").replace("%25", "%")


class KeyLayout:
    """Builds every key for one ``key_prefix``.

    Args:
        prefix: namespace for all keys, so several apps (or test runs) can share
            one Redis database; must not contain ``{``, ``}`` or ``:`` (a ``:``
            would let ``a`` + thread ``b:c`` and ``a:b`` + thread ``c`` share keys).
    """

    def __init__(self, prefix: str = "threadloom") -> None:
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "{}:"):
            raise ConfigError(
                f"key_prefix must be a non-empty string without '{{', '}}' or ':', got "
                f"{prefix!r}: a ':' would let prefix 'a' with thread 'b:c' and prefix "
                "'a:b' with thread 'c' share keys (use '-' or '.'; docs/redis.md, "
                "'Upgrading', moves keys stored under such a prefix)"
            )
        self.prefix = prefix

    def tag(self, thread_id: str) -> str:
        """``{prefix:thread}``: the shared hash tag of a thread's keys."""
        return f"{{{self.prefix}:{escape(thread_id)}}}"

    def thread_keys(self, thread_id: str) -> list[str]:
        """The eight keys of a thread, in the order every script expects (KEYS[1..8])."""
        tag = self.tag(thread_id)
        return [f"{tag}:{part}" for part in THREAD_PARTS]

    def threads(self) -> str:
        """The one cross-thread key: the set of thread ids (for operator commands)."""
        return f"{{{self.prefix}}}:threads"

    def patterns(self) -> list[str]:
        """SCAN patterns matching every key under this prefix (tests, cleanup)."""
        p = "".join("\\" + c if c in "*?[]\\" else c for c in self.prefix)
        return [f"{{{p}:*", f"{{{p}}}:*"]


# -- Lua scripts ----------------------------------------------------------------
# KEYS = KeyLayout.thread_keys(thread) (8 keys, declared), then the thread's
# lease key (RedisPlanner.lua; an expiry floor for touch); ARGV[1] = ttl seconds
# (0 = none, -1 = re-arm nothing: a read across threads). Hashes are 16 raw
# bytes; "packed" values are opaque msgpack. WI's field OWN_TTL holds a thread's
# own TTL (set_thread_ttl: seconds, -1 = never), which wins over ARGV[1].

_PRELUDE = """
local CK, IDS, ROW, REF, BLOB, RC, W, WI = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
    KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local pos = 1
local function nxt()
    pos = pos + 1
    return ARGV[pos]
end
-- no '\\0' in it: every write-index field is ns .. '\\0' .. cid (the field
-- '\\0ttl' of ce1d228, never released, was the index of a root checkpoint 'ttl')
local OWN_TTL = 'ttl'
local function touch()
    local ttl = tonumber(ARGV[1])
    if ttl < 0 then return end
    local own = redis.call('HGET', WI, OWN_TTL)
    if own then ttl = tonumber(own) end
    if ttl > 0 then
        -- KEYS[9], the thread's lease: while a run holds it, the thread lives at
        -- least as long as the lease (renewed with it, checkpoint/lease/redis.py)
        local ms = ttl * 1000
        local lease = KEYS[9] and redis.call('PTTL', KEYS[9]) or -2
        if lease > ms then ms = lease end
        for i = 1, 8 do redis.call('PEXPIRE', KEYS[i], ms) end
    end
end
-- a blob stored now starts counted at 0, so a count missing later was lost
-- (an evicted RC key): it becomes LOST, a count no release brings to 0, and
-- DROP keeps a blob without one: leaked, never deleted under a checkpoint
local LOST = 1125899906842624  -- executor.LOST (2^50)
local function put_blob(h, p)
    if redis.call('HSETNX', BLOB, h, p) == 1 then
        redis.call('HSETNX', RC, h, 0)
        return true
    end
    return false
end
local function count(h, delta)
    if redis.call('HEXISTS', RC, h) == 1 then
        redis.call('HINCRBY', RC, h, delta)
    else
        redis.call('HSET', RC, h, LOST)
    end
end
-- one reference more for every existing blob named in a packed hash list
local function hold(packed, out)
    for j = 1, #packed, 16 do
        local h = string.sub(packed, j, j + 15)
        if redis.call('HEXISTS', BLOB, h) == 1 then
            count(h, 1)
            if out then out[#out + 1] = h end
        end
    end
end
local function add_write(cf, sfx, packed)
    local full = cf .. '\\0' .. sfx
    if redis.call('HSET', W, full, packed) == 1 then
        local idx = redis.call('HGET', WI, cf)
        if idx then idx = idx .. '\\1' .. sfx else idx = sfx end
        redis.call('HSET', WI, cf, idx)
    end
end
"""

# GET: ARGV ttl, ns, checkpoint_id ('' = latest) -> {field, packed row} | nil
#      | {field} (indexed, row gone)
_GET = """
local f
if ARGV[3] ~= '' then
    f = ARGV[2] .. '\\0' .. ARGV[3]
else
    f = redis.call('ZREVRANGEBYLEX', CK, '(' .. ARGV[2] .. '\\1', '(' .. ARGV[2] .. '\\0',
        'LIMIT', 0, 1)[1]
end
touch()
if not f then return false end
local p = redis.call('HGET', ROW, f)
if not p then
    -- the index names a checkpoint whose row is gone (a lost key or field):
    -- {f} alone, so the reader refuses instead of reading an older or empty state
    if ARGV[3] == '' or redis.call('ZSCORE', CK, f) then return {f} end
    return false
end
return {f, p}
"""

# RANGE: ARGV ttl, zset ('ck' | 'ids'), max, min, limit -> {member, packed row, ...}
_RANGE = """
local z = CK
if ARGV[2] == 'ids' then z = IDS end
local members = redis.call('ZREVRANGEBYLEX', z, ARGV[3], ARGV[4], 'LIMIT', 0, tonumber(ARGV[5]))
touch()
local out = {}
for _, m in ipairs(members) do
    local f = m
    if z == IDS then
        local sep = string.find(m, '\\0', 1, true)
        f = string.sub(m, sep + 1) .. '\\0' .. string.sub(m, 1, sep - 1)
    end
    out[#out + 1] = m
    out[#out + 1] = redis.call('HGET', ROW, f) or ''
end
return out
"""

# SAVE: ARGV ttl, base row field ('' = none), nneeds, hash*, nblobs,
#       (hash, packed, children)*, nrefs, (field, packed, hashes)*, has_row,
#       [field, value, ids_member]
# -> {new blob hashes, children held for new blobs, inserted flags, stale}
# stale = 1 (and nothing written) when the diff base row or a needed blob is gone
_SAVE = """
local base, stale = nxt(), false
if base ~= '' and redis.call('HEXISTS', ROW, base) == 0 then stale = true end
for _ = 1, tonumber(nxt()) do
    if redis.call('HEXISTS', BLOB, nxt()) == 0 then stale = true end
end
if stale then return {{}, {}, {}, 1} end
local new, pre, kids, inserted = {}, {}, {}, {}
for _ = 1, tonumber(nxt()) do
    local h, p, ch = nxt(), nxt(), nxt()
    if put_blob(h, p) then
        new[#new + 1] = h
        if #ch > 0 then kids[#kids + 1] = ch end
    end
end
for _, ch in ipairs(kids) do hold(ch, pre) end
for i = 1, tonumber(nxt()) do
    local f, p, hs = nxt(), nxt(), nxt()
    inserted[i] = redis.call('HSETNX', REF, f, p)
    if inserted[i] == 1 then hold(hs, nil) end
end
if nxt() == '1' then
    local f, p, m = nxt(), nxt(), nxt()
    redis.call('HSET', ROW, f, p)
    redis.call('ZADD', CK, 0, f)
    redis.call('ZADD', IDS, 0, m)
end
touch()
return {new, pre, inserted, 0}
"""

# WRITES: ARGV ttl, nblobs, (hash, packed)*, (ns\0cid, task_id, packed, expected, hold)*
# -> new blob hashes, or nil (nothing written) when a task's stored entry is not
# the expected one ('*' any, '' none, '=' .. packed): a concurrent put_writes of
# the same task came first, and the flow merges again (compare-and-set).
# ``hold``: packed hashes to take one reference on each (SaveWrites.add_refs), or ''
_WRITES = """
local new, blobs, rows = {}, {}, {}
for _ = 1, tonumber(nxt()) do blobs[#blobs + 1] = {nxt(), nxt()} end
while pos < #ARGV do rows[#rows + 1] = {nxt(), nxt(), nxt(), nxt(), nxt()} end
for _, r in ipairs(rows) do
    if r[4] ~= '*' then
        local cur = redis.call('HGET', W, r[1] .. '\\0' .. r[2]) or ''
        if cur ~= string.sub(r[4], 2) then return false end
    end
end
for _, b in ipairs(blobs) do
    if put_blob(b[1], b[2]) then new[#new + 1] = b[1] end
end
for _, r in ipairs(rows) do
    add_write(r[1], r[2], r[3])
    if #r[5] > 0 then hold(r[5], nil) end
end
touch()
return new
"""

# ANCESTORS: ARGV ttl, ns, checkpoint_id, depth -> {field, value, ...} following parents
_ANCESTORS = """
local ns, cid, out = ARGV[2], ARGV[3], {}
for _ = 0, tonumber(ARGV[4]) do
    local f = ns .. '\\0' .. cid
    local v = redis.call('HGET', ROW, f)
    if not v then break end
    out[#out + 1] = f
    out[#out + 1] = v
    cid = string.sub(v, 1, string.find(v, '\\0', 1, true) - 1)
    if cid == '' then break end
end
return out
"""

# LOAD_WRITES: ARGV ttl, (ns\0cid)* -> {cid field, task_id, packed, ...}
_LOAD_WRITES = """
local out = {}
for i = 2, #ARGV do
    local idx = redis.call('HGET', WI, ARGV[i])
    if idx then
        for sfx in string.gmatch(idx, '[^\\1]+') do
            local p = redis.call('HGET', W, ARGV[i] .. '\\0' .. sfx)
            if p then
                out[#out + 1] = ARGV[i]
                out[#out + 1] = sfx
                out[#out + 1] = p
            end
        end
    end
end
return out
"""

# INSERT (copy_thread target, or rewritten rows): ARGV ttl, nblobs, (hash, packed, children)*,
#   nrows, (field, value, ids_member)*, nrefs, (field, packed, hashes)*,
#   (ns\0cid, task_id, packed, hashes)* -> hashes held for refs and writes (the flow
#   adjusts them again; the executor subtracts these)
_INSERT = """
local kids, pre = {}, {}
for _ = 1, tonumber(nxt()) do
    local h, p, ch = nxt(), nxt(), nxt()
    if put_blob(h, p) and #ch > 0 then kids[#kids + 1] = ch end
end
for _, ch in ipairs(kids) do hold(ch, nil) end
for _ = 1, tonumber(nxt()) do
    local f, p, m = nxt(), nxt(), nxt()
    redis.call('HSET', ROW, f, p)
    redis.call('ZADD', CK, 0, f)
    redis.call('ZADD', IDS, 0, m)
end
for _ = 1, tonumber(nxt()) do
    local f, p, hs = nxt(), nxt(), nxt()
    redis.call('HSET', REF, f, p)
    hold(hs, pre)
end
while pos < #ARGV do
    add_write(nxt(), nxt(), nxt())
    hold(nxt(), pre)
end
touch()
return pre
"""

# SET_TTL: ARGV ttl, own seconds (-1 = never): set_thread_ttl, from now on. A
# run holding the lease (KEYS[9]) keeps the thread at least as long, as touch()
# does: a shorter TTL set mid-run must not expire the keys under the run
_SET_TTL = """
local own = tonumber(ARGV[2])
redis.call('HSET', WI, OWN_TTL, own)
if own > 0 then
    local ms = own * 1000
    local lease = KEYS[9] and redis.call('PTTL', KEYS[9]) or -2
    if lease > ms then ms = lease end
    for i = 1, 8 do redis.call('PEXPIRE', KEYS[i], ms) end
else
    for i = 1, 8 do redis.call('PERSIST', KEYS[i]) end
end
return 1
"""

# ADJUST: ARGV ttl, (hash, delta)*. Counts only blobs that exist, so BLOB does;
# an RC this creates takes BLOB's expiry (no re-arm: pruning an idle thread must
# not keep it alive). Copied as a deadline (PEXPIRETIME, Redis 7+): before 7.2
# PTTL and PEXPIRE each read the clock, so a remaining time copied across a
# millisecond tick left RC 1 ms behind BLOB; older servers copy the remaining time
_ADJUST = """
local n = 0
for i = 2, #ARGV, 2 do
    if redis.call('HEXISTS', BLOB, ARGV[i]) == 1 then
        count(ARGV[i], ARGV[i + 1])
        n = n + 1
    end
end
if n > 0 and redis.call('PTTL', RC) == -1 then
    local at = redis.pcall('PEXPIRETIME', BLOB)
    if type(at) == 'number' then
        if at > 0 then redis.call('PEXPIREAT', RC, at) end
    else
        local left = redis.call('PTTL', BLOB)
        if left > 0 then redis.call('PEXPIRE', RC, left) end
    end
end
return 1
"""

SCRIPTS: dict[str, str] = {
    name: _PRELUDE + body
    for name, body in {
        "get": _GET,
        "range": _RANGE,
        "save": _SAVE,
        "writes": _WRITES,
        "load_writes": _LOAD_WRITES,
        "ancestors": _ANCESTORS,
        "insert": _INSERT,
        "adjust": _ADJUST,
        "drop": DROP,
        "delete": DELETE,
        "delete_refs": DELETE_REFS,
        "reap": REAP,
        "set_ttl": _SET_TTL,
    }.items()
}
SCRIPTS.update(once_scripts(SCRIPTS))  # a re-sent script runs once: once.py
SCRIPTS.update(fenced_scripts(SCRIPTS))  # lease-checked save/writes: checkpoint/lease/redis.py

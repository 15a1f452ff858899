"""The Lua scripts that remove things from a thread: blobs, checkpoints, refs.

Kept apart from :mod:`.keys` (which joins every script to its prelude) only to
keep files short. Each runs over the thread's eight keys (``KEYS`` as in
:mod:`.keys`), ``ARGV[1]`` being the saver's ttl; none re-arms the expiry:
removing data must not keep an idle thread alive.
"""

from __future__ import annotations

__all__ = ["DELETE", "DELETE_REFS", "DROP"]

# DROP: ARGV ttl, hash* -> {hash, packed, ...} of the blobs deleted. A blob whose
# count is missing (its RC key was evicted: docs/redis.md, "Sizing") is kept:
# leaked, not deleted under a checkpoint that may still need it. (Blobs stored
# before counts started at 0 and never referenced stay too.)
DROP = """
local out = {}
for i = 2, #ARGV do
    local p = redis.call('HGET', BLOB, ARGV[i])
    local c = redis.call('HGET', RC, ARGV[i])
    if p and c and tonumber(c) <= 0 then
        redis.call('HDEL', BLOB, ARGV[i])
        redis.call('HDEL', RC, ARGV[i])
        out[#out + 1] = ARGV[i]
        out[#out + 1] = p
    end
end
return out
"""

# DELETE: ARGV ttl, ns ('' with all='1' = every namespace), all, cid* (none = all of ns)
# -> {checkpoints deleted, checkpoints left in the thread}
DELETE = """
local ns, every = ARGV[2], ARGV[3] == '1'
local fields = {}
if every then
    local n = redis.call('HLEN', ROW)
    redis.call('DEL', CK, IDS, ROW, W, WI)  -- also writes of checkpoints never stored
    return {n, 0}
elseif #ARGV == 3 then
    fields = redis.call('ZRANGEBYLEX', CK, '(' .. ns .. '\\0', '(' .. ns .. '\\1')
else
    for i = 4, #ARGV do fields[#fields + 1] = ns .. '\\0' .. ARGV[i] end
end
local n = 0
for _, f in ipairs(fields) do
    local sep = string.find(f, '\\0', 1, true)
    n = n + redis.call('HDEL', ROW, f)
    redis.call('ZREM', CK, f)
    redis.call('ZREM', IDS, string.sub(f, sep + 1) .. '\\0' .. string.sub(f, 1, sep - 1))
    local idx = redis.call('HGET', WI, f)
    if idx then
        for sfx in string.gmatch(idx, '[^\\1]+') do redis.call('HDEL', W, f .. '\\0' .. sfx) end
        redis.call('HDEL', WI, f)
    end
end
local left = redis.call('ZCARD', IDS)
if left == 0 then redis.call('HDEL', WI, OWN_TTL) end  -- set_thread_ttl goes with the thread
return {n, left}
"""

# DELETE_REFS: ARGV ttl, mode ('thread' | 'ns' | 'keys'), ns, field*
# 'thread' drops every ref, and the thread's blobs once no row or write is left
DELETE_REFS = """
local mode, ns = ARGV[2], ARGV[3]
if mode == 'thread' then
    redis.call('DEL', REF)
    -- with no checkpoint and no write left, nothing can hold the thread's blobs
    if redis.call('EXISTS', ROW, W) == 0 then redis.call('DEL', BLOB, RC) end
elseif mode == 'ns' then
    local prefix = ns .. '\\0'
    for _, f in ipairs(redis.call('HKEYS', REF)) do
        if string.sub(f, 1, #prefix) == prefix then redis.call('HDEL', REF, f) end
    end
else
    for i = 4, #ARGV do redis.call('HDEL', REF, ARGV[i]) end
end
return 1
"""

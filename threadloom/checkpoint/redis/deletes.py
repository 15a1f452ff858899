"""The Lua scripts that remove things from a thread: blobs, checkpoints, refs.

Kept apart from :mod:`.keys` (which joins every script to its prelude) only to
keep files short. Each runs over the thread's eight keys (``KEYS`` as in
:mod:`.keys`), ``ARGV[1]`` being the saver's ttl; none re-arms the expiry:
removing data must not keep an idle thread alive.
"""

from __future__ import annotations

__all__ = ["DELETE", "DELETE_REFS", "DROP"]

# DROP: ARGV ttl, hash* -> {hash, children, data size, ...} of the blobs deleted
# (release() reads nothing else). Not the payload: the reply is stored in the
# call's op key for minutes (once.py), so a prune would have kept every byte it
# freed in Redis (more memory, not less) and readable after delete_thread.
# A blob whose count is missing (its RC key was evicted: docs/redis.md,
# "Sizing") is kept: leaked, not deleted under a checkpoint that may still need
# it. (Blobs stored before counts started at 0 and never referenced stay too.)
DROP = """
-- a packed blob is a msgpack array (tag str, data bin, children bin), read here
-- by hand (Redis' cmsgpack cannot read bin); another shape: no children, its length
local function parts(p)
    if string.byte(p, 1) ~= 0x93 then return '', #p end
    local at, span = 2, {}
    for i = 1, 3 do
        local b, n, w = string.byte(p, at), 0, 0
        if b == nil then return '', #p end
        if b >= 0xa0 and b <= 0xbf then n = b - 0xa0
        elseif b == 0xc4 or b == 0xd9 then w = 1
        elseif b == 0xc5 or b == 0xda then w = 2
        elseif b == 0xc6 or b == 0xdb then w = 4
        else return '', #p end
        for j = 1, w do n = n * 256 + (string.byte(p, at + j) or 0) end
        span[i] = {at + 1 + w, n}
        at = at + 1 + w + n
    end
    if at - 1 ~= #p then return '', #p end
    return string.sub(p, span[3][1], span[3][1] + span[3][2] - 1), span[2][2]
end
local out = {}
for i = 2, #ARGV do
    local p = redis.call('HGET', BLOB, ARGV[i])
    local c = redis.call('HGET', RC, ARGV[i])
    if p and c and tonumber(c) <= 0 then
        redis.call('HDEL', BLOB, ARGV[i])
        redis.call('HDEL', RC, ARGV[i])
        local children, size = parts(p)
        out[#out + 1] = ARGV[i]
        out[#out + 1] = children
        out[#out + 1] = size
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

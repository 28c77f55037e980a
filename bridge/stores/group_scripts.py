"""The Lua scripts of fleet-wide alert groups (`bridge.stores.groups`, docs/design.md section 5b).

Each runs on the sink's `{<sink>}` slot; the key and argument lists are given above each script.
"""

# KEYS: due, group, jobs, job details, queues, facets, gone, then the same six of the previous group
# ARGV: group key, member, job JSON, queue, now, severity rank, first alert JSON,
#       group_wait, group_interval, job name, kind
ADD_LUA = """
local due, h, jobs, details, queues, facets = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local g, member, now = ARGV[1], ARGV[2], tonumber(ARGV[5])
if redis.call('HEXISTS', h, 'closed_at') == 1 then
  for i = 2, 7 do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      redis.call('RENAME', KEYS[i], KEYS[i + 6])
    else
      redis.call('DEL', KEYS[i + 6])
    end
  end
end
if redis.call('ZSCORE', jobs, member) then return 0 end
local count = redis.call('HINCRBY', h, 'count', 1)
redis.call('ZADD', jobs, count, member)
redis.call('HSET', details, member, ARGV[3])
redis.call('HINCRBY', queues, ARGV[4], 1)
redis.call('HINCRBY', facets, 'j:' .. ARGV[10], 1)
redis.call('HINCRBY', facets, 'k:' .. ARGV[11], 1)
redis.call('HSETNX', facets, 'f:' .. ARGV[4], ARGV[5])
redis.call('HSET', facets, 'l:' .. ARGV[4], ARGV[5])
local rank = tonumber(ARGV[6])
if count == 1 then
  redis.call('HSET', h, 'first_seen', ARGV[5], 'last_seen', ARGV[5], 'notified', 0,
             'sequence', 0, 'severity', rank, 'first', ARGV[7])
  redis.call('ZADD', due, now + tonumber(ARGV[8]), g)
  return 2
end
if now > tonumber(redis.call('HGET', h, 'last_seen')) then
  redis.call('HSET', h, 'last_seen', ARGV[5])
end
if rank > tonumber(redis.call('HGET', h, 'severity')) then
  redis.call('HSET', h, 'severity', rank)
end
local previous = redis.call('HGET', h, 'previous_at')
if previous and redis.call('HEXISTS', h, 'lease') == 0 then
  local sooner = tonumber(previous) + tonumber(ARGV[9])
  local current = tonumber(redis.call('ZSCORE', due, g) or math.huge)
  if sooner < current then redis.call('ZADD', due, sooner, g) end
end
return 1
"""

# KEYS: due, group, jobs, job details, queues, facets
# ARGV: group key, now, lease until, token, max jobs listed, page (1: a notification
#       covers only the jobs it lists; the rest is due right after it)
CLAIM_LUA = """
local due, h = KEYS[1], KEYS[2]
local score = redis.call('ZSCORE', due, ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
local f = redis.call('HMGET', h, 'count', 'notified', 'sequence', 'first_seen',
                     'last_seen', 'previous_at', 'severity', 'first')
if not f[1] or not f[8] then
  redis.call('ZREM', due, ARGV[1])
  return false
end
local count, notified = tonumber(f[1]), tonumber(f[2])
local start, stop = notified, count - 1
if count <= notified then start = math.max(0, count - 10) end
local limit = tonumber(ARGV[5])
if limit > 0 and stop - start + 1 > limit then stop = start + limit - 1 end
local covered = count
if ARGV[6] == '1' and count > notified then covered = stop + 1 end
local paged = 0
if covered < count then paged = 1 end
redis.call('ZADD', due, tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', h, 'lease', ARGV[4], 'claim_count', covered, 'paged', paged)
local jobs = {}
for i, m in ipairs(redis.call('ZRANGE', KEYS[3], start, stop)) do
  jobs[i] = redis.call('HGET', KEYS[4], m) or ''
end
return {f[1], f[2], f[3], f[4], f[5], f[6] or '', f[7], f[8],
        redis.call('HGETALL', KEYS[5]), jobs, covered, redis.call('HGETALL', KEYS[6])}
"""

# KEYS: due, group, jobs, job details, queues, facets, gone
# ARGV: group key, token, delivered (1/0), now, sequence, group_interval,
#       repeat_interval, kind, closed ttl
NOTIFIED_LUA = """
local due, h, g, now = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[4])
if redis.call('HGET', h, 'lease') ~= ARGV[2] then return 0 end
redis.call('HDEL', h, 'lease')
if ARGV[3] ~= '1' then
  redis.call('ZADD', due, now + tonumber(ARGV[6]), g)
  return 1
end
local claimed = tonumber(redis.call('HGET', h, 'claim_count'))
local count = tonumber(redis.call('HGET', h, 'count'))
redis.call('HSET', h, 'notified', claimed, 'sequence', ARGV[5], 'previous_at', ARGV[4])
if count > claimed then
  local wait = tonumber(ARGV[6])
  if redis.call('HGET', h, 'paged') == '1' then wait = 0 end
  redis.call('ZADD', due, now + wait, g)
  return 1
end
if ARGV[8] == 'repeat' then
  redis.call('ZREM', due, g)
  redis.call('HSET', h, 'closed_at', ARGV[4])
  for i = 2, 7 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[9])) end
  return 2
end
redis.call('ZADD', due, now + tonumber(ARGV[7]), g)
return 1
"""

# KEYS: due, group   ARGV: group key, now
# 1 when the group has jobs no notification covered (made due now unless a claim holds it)
SEND_NOW_LUA = """
local f = redis.call('HMGET', KEYS[2], 'count', 'notified', 'lease')
if not f[1] or tonumber(f[1]) <= tonumber(f[2] or 0) then return 0 end
if not f[3] then
  local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or math.huge)
  if score > tonumber(ARGV[2]) then redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1]) end
end
return 1
"""

# KEYS: group, jobs, gone, then the same three of the previous group   ARGV: member
# {1, first alert JSON} when every member of the member's group is now gone, {0, ''} otherwise
LEFT_LUA = """
for base = 0, 3, 3 do
  if redis.call('ZSCORE', KEYS[base + 2], ARGV[1]) then
    redis.call('SADD', KEYS[base + 3], ARGV[1])
    if redis.call('SCARD', KEYS[base + 3]) >= redis.call('ZCARD', KEYS[base + 2]) then
      return {1, redis.call('HGET', KEYS[base + 1], 'first') or ''}
    end
    return {0, ''}
  end
end
return {0, ''}
"""

# KEYS: due, group   ARGV: group key, token, lease until
RENEW_LUA = """
if redis.call('HGET', KEYS[2], 'lease') ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[1])
return 1
"""


# KEYS: the group's state. ARGV: the first alert in another record format (bridge.core.formats).
REWRITE_FIRST_LUA = """
if redis.call('HEXISTS', KEYS[1], 'first') == 1 then
  redis.call('HSET', KEYS[1], 'first', ARGV[1])
  return 1
end
return 0
"""

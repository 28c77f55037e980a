"""The Lua scripts of fleet-wide alert groups (`bridge.stores.groups`, docs/design.md section 5b).

Each runs on the sink's `{<sink>}` slot; the key and argument lists are given above each script.
"""

# Keeps an open group within `cap` named jobs (docs/design.md, section 5b, "Bounded groups").
# Runs once the jobs set passes 1.5 × cap and trims it back to cap, so its cost is a few
# commands per added job. What it drops, oldest first: jobs a sent notification covered
# (on a resolving sink, only those already gone), then, if still over, the oldest of the
# rest (a resolving sink's job not yet gone counts in `unmatched`: that group no longer
# resolves on leaving). The last SAMPLES always stay, and so do the SAMPLES the next
# notification lists first. A sink that gets every job (a webhook, `unsent_max` > 0) also keeps
# up to `unsent_max` jobs no notification covered yet, beyond the cap: its next pages list them.
# The rest is renumbered 1..n, so `count`, `notified` and `claim_count` stay ranks in the jobs
# set, as release 0.1.0 reads them; `dropped` counts the jobs no longer named (total = count + dropped). A delivered
# notification records `notified_total` (the jobs it covered, named or not) and `notified_seq`,
# so the next one says how many are new (CLAIM_LUA, NOTIFIED_LUA).
TRIM_LUA = """
local function trim(h, jobs, details, gone, cap, resolving, unsent_max)
  local kept = redis.call('ZCARD', jobs)
  local notified = tonumber(redis.call('HGET', h, 'notified') or '0')
  local backlog = math.min(math.max(kept - notified, 0), unsent_max)
  if kept <= cap + math.floor(cap / 2) + backlog then return end
  local claimed = tonumber(redis.call('HGET', h, 'claim_count') or '-1')
  local all = redis.call('ZRANGE', jobs, 0, -1)
  local last, excess, picked, victims = kept - 10, kept - cap - backlog, {}, {}
  for r = 1, math.min(notified, last) do
    if #victims >= excess then break end
    if not resolving or redis.call('SISMEMBER', gone, all[r]) == 1 then
      picked[r] = true
      victims[#victims + 1] = r
    end
  end
  local unmatched = 0
  for r = 1, last do
    if #victims >= excess then break end
    if not picked[r] and (r <= notified or r > notified + 10) then
      if resolving and redis.call('SISMEMBER', gone, all[r]) == 0 then unmatched = unmatched + 1 end
      victims[#victims + 1] = r
    end
  end
  local below_notified, below_claim = 0, 0
  for _, r in ipairs(victims) do
    local m = all[r]
    redis.call('ZREM', jobs, m)
    redis.call('HDEL', details, m)
    redis.call('SREM', gone, m)
    if r <= notified then below_notified = below_notified + 1 end
    if r <= claimed then below_claim = below_claim + 1 end
  end
  redis.call('HINCRBY', h, 'count', 0 - #victims)  -- (not -x: Lua prints -0)
  redis.call('HINCRBY', h, 'dropped', #victims)
  redis.call('HINCRBY', h, 'notified', 0 - below_notified)
  if claimed >= 0 then redis.call('HINCRBY', h, 'claim_count', 0 - below_claim) end
  if unmatched > 0 then redis.call('HINCRBY', h, 'unmatched', unmatched) end
  for i, m in ipairs(redis.call('ZRANGE', jobs, 0, -1)) do redis.call('ZADD', jobs, i, m) end
end
"""

# KEYS: due, group, jobs, job details, queues, facets, gone, then the same six of the previous group
# ARGV: group key, member, job JSON, queue, now, severity rank, first alert JSON,
#       group_wait, group_interval, job name, kind, most jobs named (cap), resolving sink (1/0),
#       jobs not yet notified kept beyond the cap (a webhook's pages; 0 for people)
ADD_LUA = TRIM_LUA + """
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
trim(h, jobs, details, KEYS[7], tonumber(ARGV[12]), ARGV[13] == '1', tonumber(ARGV[14]))
count = tonumber(redis.call('HGET', h, 'count'))
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
local dropped = tonumber(redis.call('HGET', h, 'dropped') or '0')
redis.call('HSET', h, 'lease', ARGV[4], 'claim_count', covered, 'paged', paged,
           'claim_total', ARGV[4] .. ':' .. (covered + dropped))
local jobs = {}
for i, m in ipairs(redis.call('ZRANGE', KEYS[3], start, stop)) do
  jobs[i] = redis.call('HGET', KEYS[4], m) or ''
end
return {f[1], f[2], f[3], f[4], f[5], f[6] or '', f[7], f[8],
        redis.call('HGETALL', KEYS[5]), jobs, covered, redis.call('HGETALL', KEYS[6]),
        dropped, redis.call('HMGET', h, 'notified_total', 'notified_seq')}
"""

# KEYS: due, group, jobs, job details, queues, facets, gone
# ARGV: group key, token, delivered (1/0), now, sequence, group_interval,
#       repeat_interval, kind, closed ttl
# Not delivered: due again after group_interval, unless no job came for repeat_interval: then the
# group closes undelivered (its notification is in the undeliverable records), so a sink that is
# down for good holds the groups of the causes still recurring, not of every cause it ever saw.
NOTIFIED_LUA = """
local due, h, g, now = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[4])
if redis.call('HGET', h, 'lease') ~= ARGV[2] then return 0 end
redis.call('HDEL', h, 'lease')
if ARGV[3] ~= '1' then
  if now - tonumber(redis.call('HGET', h, 'last_seen') or ARGV[4]) < tonumber(ARGV[7]) then
    redis.call('ZADD', due, now + tonumber(ARGV[6]), g)
    return 1
  end
  redis.call('ZREM', due, g)
  redis.call('HSET', h, 'closed_at', ARGV[4])
  for i = 2, 7 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[9])) end
  return 2
end
local claimed = tonumber(redis.call('HGET', h, 'claim_count'))
local count = tonumber(redis.call('HGET', h, 'count'))
local total = claimed  -- jobs covered, named or dropped: the claim's own `claim_total` (0.1.0 claims write none)
local token, claimed_total = string.match(redis.call('HGET', h, 'claim_total') or '', '^(.*):(%d+)$')
if token == ARGV[2] then total = tonumber(claimed_total) end
redis.call('HSET', h, 'notified', claimed, 'sequence', ARGV[5], 'previous_at', ARGV[4],
           'notified_total', total, 'notified_seq', ARGV[5])
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
    local unmatched = tonumber(redis.call('HGET', KEYS[base + 1], 'unmatched') or '0')
    if unmatched == 0 and redis.call('SCARD', KEYS[base + 3]) >= redis.call('ZCARD', KEYS[base + 2]) then
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

package redis

import goredis "github.com/redis/go-redis/v9"

// Replies of the script: {code, arg}.
const (
	replyApplied     = 0 // arg: the fence after the write
	replyFenced      = 1 // arg: the last fence, greater than the token
	replyCompareFail = 2 // arg: the index (from 1) of the compare-and-set that failed
	replyWrongType   = 3 // arg: the index of the op whose key holds the wrong type
	replyNotInteger  = 4 // arg: the index of the INCRBY whose value or sum is out of range
	replyBadFence    = 5 // arg: what the fence key holds, which is not a token
)

// script checks the fence and every op before it writes anything, so that a
// refused Apply changes nothing: Redis does not roll a script back when a
// command in it fails.
//
// Tokens and INCRBY values are compared and added as decimal strings, since
// Lua's numbers are doubles, exact only up to 2^53.
const scriptSource = `
-- fence guard. KEYS[1]: the fence key; KEYS[i+1]: the key of op i.
-- ARGV[1]: the token, in decimal ("0": unfenced); ARGV[4i-2 .. 4i+1]: op i's kind and operands.
-- Replies {code, arg}: see script.go.

-- ucmp compares two digit strings without leading zeros: -1, 0 or 1.
local function ucmp(a, b)
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      if x < y then return -1 end
      return 1
    end
  end
  return 0
end

-- isint reports whether s is an integer as INCRBY reads one (Redis's
-- string2ll): "0", or an optional '-' and digits without a leading zero,
-- within a signed 64-bit integer.
local function isint(s)
  if s == '0' then return true end
  local neg = string.sub(s, 1, 1) == '-'
  local d = s
  if neg then d = string.sub(s, 2) end
  if #d > 19 or not string.find(d, '^[1-9][0-9]*$') then return false end
  if neg then return ucmp(d, '9223372036854775808') <= 0 end
  return ucmp(d, '9223372036854775807') <= 0
end

-- uadd adds two digit strings.
local function uadd(a, b)
  local r, carry, i, j = {}, 0, #a, #b
  while i > 0 or j > 0 or carry > 0 do
    local s = carry
    if i > 0 then s = s + string.byte(a, i) - 48 end
    if j > 0 then s = s + string.byte(b, j) - 48 end
    carry = 0
    if s >= 10 then s, carry = s - 10, 1 end
    table.insert(r, 1, string.char(48 + s))
    i, j = i - 1, j - 1
  end
  return table.concat(r)
end

-- usub subtracts digit string b from a, where a > b.
local function usub(a, b)
  local r, borrow, i, j = {}, 0, #a, #b
  while i > 0 do
    local s = string.byte(a, i) - 48 - borrow
    if j > 0 then s = s - (string.byte(b, j) - 48) end
    borrow = 0
    if s < 0 then s, borrow = s + 10, 1 end
    table.insert(r, 1, string.char(48 + s))
    i, j = i - 1, j - 1
  end
  local d = string.gsub(table.concat(r), '^0+', '')
  return d
end

-- add adds two integers in decimal (as isint accepts them), exactly.
local function add(x, y)
  local xneg, yneg = string.sub(x, 1, 1) == '-', string.sub(y, 1, 1) == '-'
  local xd, yd = x, y
  if xneg then xd = string.sub(x, 2) end
  if yneg then yd = string.sub(y, 2) end
  if xneg == yneg then
    local d = uadd(xd, yd)
    if xneg then return '-' .. d end
    return d
  end
  local c = ucmp(xd, yd)
  if c == 0 then return '0' end
  local d, neg = usub(yd, xd), yneg
  if c > 0 then d, neg = usub(xd, yd), xneg end
  if neg then return '-' .. d end
  return d
end

local token = ARGV[1]
-- Token "0": a best-effort resource's ops, without the fence.
local unfenced = token == '0'
local fence = false
if not unfenced then fence = redis.call('GET', KEYS[1]) end
if fence then
  if #fence > 19 or not string.find(fence, '^[1-9][0-9]*$') then return {5, fence} end
  if ucmp(token, fence) < 0 then return {1, fence} end
end

-- Check every op against the keys as the ops before it leave them.
local state = {}
local function load(k)
  local s = state[k]
  if not s then
    s = {t = redis.call('TYPE', k)['ok']}
    if s.t == 'string' then s.v = redis.call('GET', k) end
    state[k] = s
  end
  return s
end
local n = #KEYS - 1
for i = 1, n do
  local k, kind, a, b, c = KEYS[i + 1], ARGV[4*i - 2], ARGV[4*i - 1], ARGV[4*i], ARGV[4*i + 1]
  if kind == 'S' then
    state[k] = {t = 'string', v = a}
  elseif kind == 'D' then
    state[k] = {t = 'none'}
  elseif kind == 'H' then
    local s = load(k)
    if s.t ~= 'hash' and s.t ~= 'none' then return {3, i} end
    state[k] = {t = 'hash'}
  elseif kind == 'I' then
    local s = load(k)
    if s.t ~= 'string' and s.t ~= 'none' then return {3, i} end
    local v = s.v or '0'
    if not isint(v) then return {4, i} end
    local r = add(v, a)
    if not isint(r) then return {4, i} end
    state[k] = {t = 'string', v = r}
  elseif kind == 'C' then
    local s = load(k)
    if a == '0' then
      if s.t ~= 'none' then return {2, i} end
    elseif s.t == 'none' then
      return {2, i}
    elseif s.t ~= 'string' then
      return {3, i}
    elseif s.v ~= b then
      return {2, i}
    end
    state[k] = {t = 'string', v = c}
  else
    return redis.error_reply('fence guard: unknown op kind ' .. tostring(kind))
  end
end

-- Every check passed: write.
if not unfenced and (not fence or ucmp(token, fence) > 0) then redis.call('SET', KEYS[1], token) end
for i = 1, n do
  local k, kind, a, b, c = KEYS[i + 1], ARGV[4*i - 2], ARGV[4*i - 1], ARGV[4*i], ARGV[4*i + 1]
  if kind == 'S' then
    if b == '0' then redis.call('SET', k, a) else redis.call('SET', k, a, 'PX', b) end
  elseif kind == 'D' then
    redis.call('DEL', k)
  elseif kind == 'H' then
    redis.call('HSET', k, a, b)
  elseif kind == 'I' then
    redis.call('INCRBY', k, a)
  else
    redis.call('SET', k, c)
  end
end
return {0, token}
`

// script is the guard's script; go-redis computes its SHA1 for EVALSHA.
var script = goredis.NewScript(scriptSource)

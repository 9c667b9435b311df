#!/usr/bin/env bash
# Load test of the HTTP proxy adapter (BENCHMARKS.md P5): 8 fake model servers
# on 127.0.0.1 behind "eppkit proxy", 8 KB chat prompts, wrk as the load
# generator (apt-get install wrk). It reports
#   - requests/s at saturation through the proxy and straight to one fake server;
#   - p50/p99 latency at a paced 1,000 req/s through the proxy and straight to a
#     fake server, and the difference: what the proxy adds.
# Usage: examples/httpproxy/loadtest.sh [duration, default 20s]
# Environment: BASE_PORT (default 18000), CONNS (saturation connections, 64),
# RATE (paced rate, 1000), PACED_CONNS (32).
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${1:-20s}
BASE_PORT=${BASE_PORT:-18000}
CONNS=${CONNS:-64}
RATE=${RATE:-1000}
PACED_CONNS=${PACED_CONNS:-32}
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/eppkit" ./cmd/eppkit
# The fake servers are test infrastructure sharing the cores: a lazier GC
# leaves more of them to the proxy (which runs with Go's defaults).
GOGC=400 "$work/eppkit" fakeserver --count 8 --base-port $((BASE_PORT + 1)) >"$work/fake.log" 2>&1 &
pids+=($!)
eps=$(seq -s, -f "127.0.0.1:%g" $((BASE_PORT + 1)) $((BASE_PORT + 8)))
"$work/eppkit" proxy --endpoints "$eps" --listen "127.0.0.1:$BASE_PORT" --log-level error >"$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$BASE_PORT/healthz" >/dev/null && break
  sleep 0.1
done
sleep 0.5 # the first metric scrapes

# 64 distinct 8 KB chat bodies (64 tenants with their own system prompt), in turn.
cat >"$work/post.lua" <<'EOF'
local bodies = {}
local words = {"alpha","beta","gamma","delta","epsilon","zeta","eta","theta","iota","kappa","lambda","mu"}
for t = 1, 64 do
  local parts, n, i = {}, 0, t
  while n < 8000 do
    local w = words[(i * 7 + t) % #words + 1] .. t
    parts[#parts + 1] = w
    n = n + #w + 1
    i = i + 1
  end
  bodies[t] = '{"model":"fake-model","max_tokens":16,"messages":[{"role":"system","content":"' ..
    table.concat(parts, " ") .. '"},{"role":"user","content":"question ' .. t .. '"}]}'
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local k = 0
request = function()
  k = k + 1
  return wrk.format(nil, "/v1/chat/completions", nil, bodies[k % 64 + 1])
end
-- Pacing (RATE set): each thread hands out send slots spaced 1/rate apart.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_usec; } timeval;
int gettimeofday(timeval *tv, void *tz);
]]
local tv = ffi.new("timeval")
local function now_ms()
  ffi.C.gettimeofday(tv, nil)
  return tonumber(tv.tv_sec) * 1000 + tonumber(tv.tv_usec) / 1000
end
local interval, nextslot = nil, nil
init = function(args)
  if args[1] then interval = 1000 * tonumber(args[2]) / tonumber(args[1]) end
end
delay = function()
  if not interval then return 0 end
  local t = now_ms()
  if not nextslot or nextslot < t then nextslot = t end
  local d = nextslot - t
  nextslot = nextslot + interval
  return math.floor(d)
end
EOF

run() { # name url [rate]
  local args=(-t2 -c"$CONNS" -d"$DURATION" --latency -s "$work/post.lua" "$2")
  if [ -n "${3:-}" ]; then args=(-t2 -c"$PACED_CONNS" -d"$DURATION" --latency -s "$work/post.lua" "$2" -- "$3" 2); fi
  wrk "${args[@]}" >"$work/$1.txt"
  local rps p50 p99 errs
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/$1.txt")
  p50=$(awk '$1 == "50%" {print $2}' "$work/$1.txt")
  p99=$(awk '$1 == "99%" {print $2}' "$work/$1.txt")
  errs=$(awk '/Non-2xx|Socket errors/' "$work/$1.txt" | tr '\n' ' ')
  printf '%-28s %10s req/s   p50 %8s   p99 %8s %s\n' "$1" "$rps" "$p50" "$p99" "$errs"
  echo "$p50 $p99" >"$work/$1.lat"
}

ms() { # wrk latency (us, ms, s) → milliseconds
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /[^m]s$/) n *= 1000; printf "%.3f", n }'
}

echo "== saturation ($CONNS connections, $DURATION)"
run "direct (1 fake server)" "http://127.0.0.1:$((BASE_PORT + 1))"
run "proxy (8 fake servers)" "http://127.0.0.1:$BASE_PORT"
echo "== paced at $RATE req/s ($PACED_CONNS connections, $DURATION)"
run "direct-paced" "http://127.0.0.1:$((BASE_PORT + 1))" "$RATE"
run "proxy-paced" "http://127.0.0.1:$BASE_PORT" "$RATE"
read -r d50 d99 <"$work/direct-paced.lat"
read -r p50 p99 <"$work/proxy-paced.lat"
echo "== added by the proxy at $RATE req/s: p50 $(awk -v a="$(ms "$p50")" -v b="$(ms "$d50")" 'BEGIN{printf "%.3f", a-b}') ms," \
  "p99 $(awk -v a="$(ms "$p99")" -v b="$(ms "$d99")" 'BEGIN{printf "%.3f", a-b}') ms"

#!/usr/bin/env bash
# bench-ws-loader.sh: how fast is `fairground load --scenario ws-echo-N`,
# next to the floor of a WebSocket echo client on the same core?
#
# The reference server, `fairground serve --threads 1`, is pinned to core
# $SERVER_CPU and listens on 127.0.0.1 only (it echoes on /ws). Two clients,
# one thread each, run in turn pinned to core $LOADER_CPU against it, with the
# same connections ($CONNS), message sizes ($SIZES), warm-up and duration, one
# text message in flight per connection:
#   fairground  `fairground load --scenario ws-echo-SIZE -t 1 --json`;
#   anchor      scripts/ws-echo-client.c, compiled here with `gcc -O2`: one
#               thread, epoll, each connection upgrades (`GET /ws`, the 101's
#               Sec-WebSocket-Accept checked), then sends one masked text frame
#               of SIZE bytes (a fresh mask key each), waits for its echo,
#               compares it whole with what it sent, sends the next.
# Interleaved: every repetition runs both for each size, the order flipping
# every repetition; $REPS repetitions. Printed per size, as medians over the
# repetitions: messages/s and client CPU µs per message (user+sys over the
# measured window / echoes completed in it: fairground's `loader.user_cpu_us`
# + `sys_cpu_us` / `responses.status_2xx`; the anchor's getrusage over its
# window / its echoes), and the ratios fairground/anchor, per repetition,
# then their median. Also each side's core busy share, so a server-bound
# run is visible: with the server on one core both clients may read the
# server's ceiling in msg/s, and then CPU per message is the figure that
# compares the clients.
#
# Why a C client as the anchor (checked 2026-12-06 on this Debian bookworm
# machine, 50 connections, 64 B, one 3 s run each under load average ~3,
# C floor 6.9 µs CPU/msg, fairground 6.9):
#   - no WebSocket benchmarking client is packaged in bookworm: websocat, k6
#     and thor are not (`apt-cache policy` finds none); websocat is on
#     crates.io but drives one connection (a netcat), not a load;
#   - tsung (bookworm, Erlang, ts_websocket sessions): ~14k msg/s at up to
#     45 µs CPU/msg (whole process over an 8 s run, its start included);
#   - node-ws (bookworm, a library driven by a small node client): 28.6k
#     msg/s at 61 µs CPU/msg (154 µs at 4 KiB);
#   - picows (PyPI, Cython, with uvloop; a library, the client loop in
#     Python): 42k msg/s at 10.3 µs CPU/msg (11.9 at 4 KiB), the fastest
#     independent one, still 1.3-1.5x the C floor.
# None is a tool fast enough to say anything about fairground's speed, so
# the anchor is the floor: what the kernel and a trivial client cost per
# message. A ratio near 1.0 means fairground adds little over that floor.
#
# A benchmark, not a test. It waits (up to $LOAD_WAIT s) for the 1-minute
# load average to fall to $MAX_LOAD and for the shared measurement lock
# ($LOCK, as the Docker tests and bench-loader.sh use) to be free, holds the
# lock while it measures (past the wait it measures at whatever load, but
# never without the lock), and prints the load average before, after each
# repetition and after.
# Env: DURATION (default 5s), WARMUP (1s), REPS (5), CONNS (50), SIZES
# ("64 4096"), PORT (18299), SERVER_CPU (1), LOADER_CPU (0), MAX_LOAD (1.0),
# LOAD_WAIT (1200), LOCK (/tmp/fairground-docker.lock; empty: no lock),
# NO_BUILD=1 to use the existing target/release/fairground, FG_BIN=PATH to
# measure another fairground binary.
set -euo pipefail

DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
REPS=${REPS:-5}
CONNS=${CONNS:-50}
SIZES=${SIZES:-"64 4096"}
PORT=${PORT:-18299}
SERVER_CPU=${SERVER_CPU:-1}
LOADER_CPU=${LOADER_CPU:-0}
MAX_LOAD=${MAX_LOAD:-1.0}
LOAD_WAIT=${LOAD_WAIT:-1200}
LOCK=${LOCK-/tmp/fairground-docker.lock}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${FG_BIN:-$ROOT/target/release/fairground}
secs=${DURATION%s}
warm=${WARMUP%s}
[[ "$secs" =~ ^[0-9]+$ && "$warm" =~ ^[0-9]+$ ]] || { echo "bench-ws-loader: DURATION and WARMUP must be whole seconds, like 5s" >&2; exit 2; }
for size in $SIZES; do
  [[ "$size" =~ ^[0-9]+$ ]] && (( size >= 16 && size <= 65535 )) || { echo "bench-ws-loader: sizes are 16..65535 bytes" >&2; exit 2; }
done
# Every client run is bounded: warm-up, duration, connects, drain and slack.
RUN_LIMIT=$((warm + secs + 20))

for tool in gcc taskset python3 flock timeout; do
  command -v "$tool" >/dev/null || { echo "bench-ws-loader: $tool is missing" >&2; exit 2; }
done
[[ -n "${NO_BUILD:-}${FG_BIN:-}" ]] || (cd "$ROOT" && cargo build --release --locked --quiet)
[[ -x "$BIN" ]] || { echo "bench-ws-loader: no fairground binary at $BIN" >&2; exit 2; }

TMP=$(mktemp -d /tmp/fairground-bench-ws.XXXXXX)
SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  SERVER_PID=""
}
cleanup() { stop_server; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

gcc -O2 -Wall -o "$TMP/ws-echo-client" "$ROOT/scripts/ws-echo-client.c"

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Wait, bounded, for a quiet machine and a free measurement lock (taken
# only once the load is low, so the wait does not hold up the Docker tests).
# Past $LOAD_WAIT s it measures anyway, at whatever load, but never without
# the lock.
[[ -z "$LOCK" ]] || exec 9>>"$LOCK"
quiet() { python3 -c "import sys; sys.exit(float(open('/proc/loadavg').read().split()[0]) > float(sys.argv[1]))" "$MAX_LOAD"; }
deadline=$((SECONDS + LOAD_WAIT))
said=""
until quiet && { [[ -z "$LOCK" ]] || flock -n 9; }; do
  if (( SECONDS >= deadline )); then
    if [[ -n "$LOCK" ]] && ! flock -w 120 9; then
      echo "bench-ws-loader: the measurement lock $LOCK stayed held; giving up" >&2
      exit 1
    fi
    echo "bench-ws-loader: load average still $(loadavg) after ${LOAD_WAIT}s (MAX_LOAD $MAX_LOAD); measuring anyway" >&2
    break
  fi
  [[ -n "$said" ]] || echo "bench-ws-loader: waiting (at most ${LOAD_WAIT}s) for load average <= $MAX_LOAD (now $(loadavg)) and a free $LOCK" >&2
  said=1
  sleep 15
done

SERVER_LIFE=$(( 2 * RUN_LIMIT * REPS * $(wc -w <<<"$SIZES") + 60 ))
# timeout's child is the server itself (taskset execs it).
timeout "$SERVER_LIFE" taskset -c "$SERVER_CPU" "$BIN" serve --bind 127.0.0.1 --port "$PORT" --threads 1 > "$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
  if python3 -c "import socket,sys;s=socket.socket();s.settimeout(0.2);sys.exit(s.connect_ex(('127.0.0.1',$PORT)))" 2>/dev/null; then break; fi
  sleep 0.1
done
SRV=$(cat "/proc/$SERVER_PID/task/$SERVER_PID/children" 2>/dev/null | awk '{print $1}')
[[ -n "$SRV" && -r "/proc/$SRV/stat" ]] || { echo "bench-ws-loader: the server did not start on 127.0.0.1:$PORT" >&2; cat "$TMP/server.log" >&2; exit 1; }
CLK_TCK=$(getconf CLK_TCK)

# The server's CPU time so far, in ticks.
server_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$SRV/stat"; }

# run_anchor SIZE -> "msg_per_s msgs cpu_us window_s"
run_anchor() {
  timeout "$RUN_LIMIT" taskset -c "$LOADER_CPU" "$TMP/ws-echo-client" "$PORT" /ws "$CONNS" "$1" "$warm" "$secs" > "$TMP/anchor.out"
  python3 - "$TMP/anchor.out" <<'PY'
import sys
kv = dict(f.split("=") for f in open(sys.argv[1]).read().split())
if int(kv["wrong"]) or int(kv["closed"]):
    print("anchor: wrong echoes or closed connections:", kv, file=sys.stderr)
print(kv["msg_per_s"], kv["msgs"], int(kv["user_us"]) + int(kv["sys_us"]), kv["secs"])
PY
}

# run_fg SIZE -> "msg_per_s msgs cpu_us window_s"
run_fg() {
  timeout "$RUN_LIMIT" taskset -c "$LOADER_CPU" "$BIN" load --url "http://127.0.0.1:$PORT" --scenario "ws-echo-$1" \
    -c "$CONNS" -t 1 -d "$DURATION" --warmup "$WARMUP" --json > "$TMP/fg.json"
  python3 - "$TMP/fg.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["responses"]["status_2xx"]
if any(r["errors_whole_run"].values()) or r["responses"]["status_other"]:
    print("fairground reported errors:", r["errors_whole_run"], r["responses"], file=sys.stderr)
print(r["throughput_rps"], ok, r["loader"]["user_cpu_us"] + r["loader"]["sys_cpu_us"], r["measured_s"])
PY
}

# measure WHO SIZE -> "msg_per_s msgs cpu_us window_s server_busy", server_busy
# = the server's CPU share of its core over the whole client run.
measure() {
  local t0 s0 t1 s1 out
  t0=$(date +%s.%N); s0=$(server_ticks)
  out=$("run_$1" "$2")
  t1=$(date +%s.%N); s1=$(server_ticks)
  echo "$out $(python3 -c "import sys; print((float(sys.argv[2]) - float(sys.argv[1])) / $CLK_TCK / (float(sys.argv[4]) - float(sys.argv[3])))" "$s0" "$s1" "$t0" "$t1")"
}

echo "bench-ws-loader: server (fairground serve --threads 1) on cpu $SERVER_CPU, clients on cpu $LOADER_CPU (one thread each)," \
  "$CONNS connections, one message in flight each, ${WARMUP} warm-up + $DURATION, $REPS repetitions, sizes $SIZES"
echo "load average before: $(loadavg)"
SUMMARY="$TMP/summary"
: > "$SUMMARY"
for rep in $(seq "$REPS"); do
  for size in $SIZES; do
    if (( rep % 2 )); then
      read -r a_rps a_n a_cpu a_s a_srv < <(measure anchor "$size")
      read -r f_rps f_n f_cpu f_s f_srv < <(measure fg "$size")
    else
      read -r f_rps f_n f_cpu f_s f_srv < <(measure fg "$size")
      read -r a_rps a_n a_cpu a_s a_srv < <(measure anchor "$size")
    fi
    echo "$size $a_rps $a_n $a_cpu $a_s $a_srv $f_rps $f_n $f_cpu $f_s $f_srv" >> "$SUMMARY"
    python3 - "$rep" "$size" "$a_rps" "$a_n" "$a_cpu" "$a_s" "$a_srv" "$f_rps" "$f_n" "$f_cpu" "$f_s" "$f_srv" "$(loadavg)" <<'PY'
import sys
rep, size = sys.argv[1:3]
a_rps, a_n, a_cpu, a_s, a_srv, f_rps, f_n, f_cpu, f_s, f_srv = map(float, sys.argv[3:13])
apm, fpm = a_cpu / a_n, f_cpu / f_n
print(f"  rep {rep} {size:>5} B: anchor {a_rps:8.0f} msg/s {apm:6.2f} us CPU/msg (client {a_cpu / a_s / 1e6:4.0%}, server {a_srv:4.0%}) | "
      f"fairground {f_rps:8.0f} msg/s {fpm:6.2f} us CPU/msg (client {f_cpu / f_s / 1e6:4.0%}, server {f_srv:4.0%}) | "
      f"msg/s ratio {f_rps / a_rps:.3f}, CPU ratio {fpm / apm:.3f} | load {sys.argv[13]}")
PY
  done
done
echo "load average after: $(loadavg)"
python3 - "$SUMMARY" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    size, *v = line.split()
    rows.setdefault(int(size), []).append(list(map(float, v)))
med = st.median
print("summary (medians over repetitions; ratios = fairground / anchor, median of the per-repetition ratios):")
for size, reps in rows.items():
    a_rps = med(r[0] for r in reps); f_rps = med(r[5] for r in reps)
    a_pm = med(r[2] / r[1] for r in reps); f_pm = med(r[7] / r[6] for r in reps)
    rps_ratio = med(r[5] / r[0] for r in reps)
    cpu_ratio = med((r[7] / r[6]) / (r[2] / r[1]) for r in reps)
    a_busy = med(r[2] / r[3] / 1e6 for r in reps); f_busy = med(r[7] / r[8] / 1e6 for r in reps)
    srv = med([r[4] for r in reps] + [r[9] for r in reps])
    print(f"  {size:>5} B, {len(reps)} reps: msg/s anchor {a_rps:,.0f}, fairground {f_rps:,.0f}, ratio {rps_ratio:.3f} | "
          f"client CPU per message anchor {a_pm:.2f} us, fairground {f_pm:.2f} us, ratio {cpu_ratio:.3f} | "
          f"client core busy anchor {a_busy:.0%}, fairground {f_busy:.0%}; server core busy {srv:.0%}")
    if srv >= 0.9:
        print(f"         the server's core was {srv:.0%} busy (the clients' {a_busy:.0%} and {f_busy:.0%}): msg/s is near "
              "the one-core ceiling for both clients, so CPU per message is the figure that compares them")
    elif max(a_busy, f_busy) < 0.9:
        print("         neither core was saturated: msg/s follows the round trip and the scheduler more than "
              "either client, so CPU per message is the figure that compares them")
PY

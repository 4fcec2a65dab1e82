#!/usr/bin/env bash
# bench-loader.sh: how does `fairground load` compare with wrk on one core?
#
# Two kinds of server, each pinned to core $SERVER_CPU and listening on
# 127.0.0.1 only:
#   nginx    1 worker, `return 200 "Hello, World!"` (an event loop);
#   threads  scripts/bench-loader-server.rs, compiled here with `rustc -O`:
#            one blocking OS thread per connection (every request wakes a
#            sleeping thread).
# wrk and `fairground load` (release build), one thread each, run in turn
# pinned to core $LOADER_CPU, side by side in pairs (the order flips every
# pair, so neither always runs first), $PAIRS pairs per server and connection
# count. Each server's runs hold the shared measurement lock ($LOCK, as the
# Docker tests do), so no other measurement runs beside them; a compile may.
#
# Printed per server and connection count, as medians over the pairs:
#   req/s ratio  fairground req/s / wrk req/s, per pair    (goal >= 1.3)
#   CPU ratio    fairground CPU per response / wrk's        (goal <= 0.75)
# CPU per response = user+sys CPU time of the loader process (bash `time`,
# whole process: connects and fairground's drain included) / the responses it
# reported (wrk: all of its run; fairground: those completed in its window).
# On a shared machine req/s follows the scheduler more than either loader;
# CPU per response is the steadier figure. Load averages are printed before
# and after.
#
# Protocols (PROTOCOLS, default "http1"; "http1 https h2 h2c" for all):
# against nginx only (the threads server speaks HTTP/1.1), with a CA and
# certificate made here by openssl for https and h2. The reference per
# protocol: wrk for http1 and https (Debian's wrk speaks TLS), h2load
# (nghttp2-client) for h2 and h2c, each with one thread and one stream per
# connection, against the same nginx (`listen ssl http2` for TLS, `listen
# http2` for h2c).
#
# A benchmark, not a test. Env: DURATION (default 10s), PAIRS (3), PORT
# (18199), CONNS ("100 1000"), SERVERS ("nginx threads"), SERVER_CPU (0),
# LOADER_CPU (1), LOCK (/tmp/fairground-docker.lock; empty: no lock),
# FG_FLAGS (extra flags for fairground load), NO_BUILD=1 to use the existing
# target/release/fairground, FG_BIN=PATH to measure another fairground binary
# (e.g. an older build, for a before/after figure), REF_BIN=PATH to compare
# with another fairground binary instead of wrk/h2load (named REF_NAME in the
# output; scripts/bench-release-profile.sh compares two release profiles so).
set -euo pipefail

DURATION=${DURATION:-10s}
PAIRS=${PAIRS:-3}
PORT=${PORT:-18199}
CONNS=${CONNS:-"100 1000"}
SERVERS=${SERVERS:-"nginx threads"}
PROTOCOLS=${PROTOCOLS:-http1}
SERVER_CPU=${SERVER_CPU:-0}
LOADER_CPU=${LOADER_CPU:-1}
LOCK=${LOCK-/tmp/fairground-docker.lock}
FG_FLAGS=${FG_FLAGS:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${FG_BIN:-$ROOT/target/release/fairground}
secs=${DURATION%s}
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "bench-loader: DURATION must be whole seconds, like 10s" >&2; exit 2; }
# Every loader run is bounded: its duration plus connects, drain and slack.
RUN_LIMIT=$((secs + 30))

for tool in nginx wrk taskset python3 rustc flock openssl; do
  command -v "$tool" >/dev/null || { echo "bench-loader: $tool is missing (make deps)" >&2; exit 2; }
done
if [[ " $PROTOCOLS " == *" h2"* ]]; then
  command -v h2load >/dev/null || { echo "bench-loader: h2load is missing (make deps: nghttp2-client)" >&2; exit 2; }
fi
[[ -n "${NO_BUILD:-}${FG_BIN:-}" ]] || (cd "$ROOT" && cargo build --release --locked --quiet)

TMP=$(mktemp -d /tmp/fairground-bench-loader.XXXXXX)
SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  SERVER_PID=""
}
cleanup() { stop_server; rm -rf "$TMP"; }
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)"
if [[ -n "$LOCK" ]]; then exec 9>>"$LOCK"; fi
lock() { [[ -z "$LOCK" ]] || flock 9; }
unlock() { [[ -z "$LOCK" ]] || flock -u 9; }

# The longest a server may live (it starts once the lock is held): every
# pair of every connection count.
SERVER_LIFE=$(( (2 * RUN_LIMIT * PAIRS + 60) * $(wc -w <<<"$CONNS") ))

# A CA and a certificate for 127.0.0.1 (name localhost), made once.
make_certs() {
  [[ -f "$TMP/chain.pem" ]] && return 0
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=bench-ca -keyout "$TMP/ca.key" -out "$TMP/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$TMP/server.key" -out "$TMP/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$TMP/ext"
  openssl x509 -req -in "$TMP/server.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial \
    -days 1 -extfile "$TMP/ext" -out "$TMP/server.pem" 2>/dev/null
  cat "$TMP/server.pem" "$TMP/ca.pem" > "$TMP/chain.pem"
}

# The listen line of nginx for protocol $1.
listen_line() {
  case "$1" in
    http1) echo "listen 127.0.0.1:$PORT backlog=4096;" ;;
    https | h2) echo "listen 127.0.0.1:$PORT ssl http2 backlog=4096; ssl_certificate $TMP/chain.pem; ssl_certificate_key $TMP/server.key; ssl_session_cache off; ssl_session_tickets off;" ;;
    h2c) echo "listen 127.0.0.1:$PORT http2 backlog=4096;" ;;
  esac
}

start_nginx() {
  mkdir -p "$TMP/logs" "$TMP/tmp"
  [[ "$PROTO" == http1 || "$PROTO" == h2c ]] || make_certs
  cat > "$TMP/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 16384;
daemon off;
master_process off;
pid $TMP/nginx.pid;
error_log $TMP/logs/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $TMP/tmp/body;
  proxy_temp_path $TMP/tmp/proxy;
  fastcgi_temp_path $TMP/tmp/fastcgi;
  uwsgi_temp_path $TMP/tmp/uwsgi;
  scgi_temp_path $TMP/tmp/scgi;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  server {
    $(listen_line "$PROTO")
    default_type text/plain;
    location / { return 200 "Hello, World!"; }
  }
}
CONF
  taskset -c "$SERVER_CPU" timeout "$SERVER_LIFE" nginx -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/logs/error.log" &
  SERVER_PID=$!
}

start_threads() {
  [[ -x "$TMP/threads-server" ]] || rustc -O --edition 2021 -o "$TMP/threads-server" "$ROOT/scripts/bench-loader-server.rs"
  taskset -c "$SERVER_CPU" "$TMP/threads-server" "$PORT" "$SERVER_LIFE" &
  SERVER_PID=$!
}

wait_listening() {
  for _ in $(seq 100); do
    if python3 -c "import socket,sys;s=socket.socket();s.settimeout(0.2);sys.exit(s.connect_ex(('127.0.0.1',$PORT)))" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "bench-loader: the $1 server did not listen on 127.0.0.1:$PORT" >&2
  exit 1
}

url() {
  case "$PROTO" in
    https | h2) echo "https://127.0.0.1:$PORT/" ;;
    *) echo "http://127.0.0.1:$PORT/" ;;
  esac
}

# run_ref CONNS -> "rps responses cpu_s": wrk for HTTP/1.1, h2load for HTTP/2,
# or the fairground binary REF_BIN.
run_ref() {
  if [[ -n "${REF_BIN:-}" ]]; then BIN="$REF_BIN" run_fg "$1"; return; fi
  case "$PROTO" in
    h2 | h2c) run_h2load "$1" ;;
    *) run_wrk "$1" ;;
  esac
}

# run_h2load CONNS -> "rps responses cpu_s"
run_h2load() {
  local cpu
  TIMEFORMAT='%U %S'
  { time timeout "$RUN_LIMIT" taskset -c "$LOADER_CPU" h2load -t1 -c"$1" -m1 -D"$secs" "$(url)" > "$TMP/h2load.out"; } 2> "$TMP/h2load.time"
  cpu=$(tail -1 "$TMP/h2load.time" | awk '{print $1 + $2}')
  python3 - "$TMP/h2load.out" "$cpu" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"finished in [^,]+, ([0-9.]+) req/s", text).group(1))
m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", text)
done, ok, failed, errored = map(int, m.groups())
if failed or errored:
    print("h2load reported errors:", m.group(0), file=sys.stderr)
print(rps, ok, sys.argv[2])
PY
}

# run_wrk CONNS -> "rps responses cpu_s"
run_wrk() {
  local cpu
  TIMEFORMAT='%U %S'
  { time timeout "$RUN_LIMIT" taskset -c "$LOADER_CPU" wrk -t1 -c"$1" -d"$DURATION" "$(url)" > "$TMP/wrk.out"; } 2> "$TMP/wrk.time"
  cpu=$(tail -1 "$TMP/wrk.time" | awk '{print $1 + $2}')
  python3 - "$TMP/wrk.out" "$cpu" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
n = int(re.search(r"(\d+) requests in", text).group(1))
errs = re.search(r"Socket errors:.*", text)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
if errs or non2xx:
    print("wrk reported errors:", errs.group(0) if errs else "", non2xx.group(0) if non2xx else "", file=sys.stderr)
print(rps, n, sys.argv[2])
PY
}

# run_fg CONNS -> "rps responses cpu_s"
run_fg() {
  local cpu
  TIMEFORMAT='%U %S'
  # shellcheck disable=SC2086 # FG_FLAGS is a list of flags
  local tls=()
  [[ "$PROTO" == https || "$PROTO" == h2 ]] && tls=(--tls-ca "$TMP/ca.pem" --tls-name localhost)
  { time timeout "$RUN_LIMIT" taskset -c "$LOADER_CPU" "$BIN" load --url "$(url)" --protocol "$PROTO" "${tls[@]}" -t 1 -c "$1" -d "$DURATION" $FG_FLAGS --json > "$TMP/fg.json"; } 2> "$TMP/fg.time"
  cpu=$(tail -1 "$TMP/fg.time" | awk '{print $1 + $2}')
  python3 - "$TMP/fg.json" "$cpu" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
total = sum(r["responses"].values())
if any(r["errors_whole_run"].values()) or r["responses"]["status_2xx"] != total:
    print("fairground reported errors:", r["errors_whole_run"], r["responses"], file=sys.stderr)
print(r["throughput_rps"], total, sys.argv[2])
PY
}

export REF_NAME=${REF_NAME:-${REF_BIN:+reference}}
echo "bench-loader: servers on cpu $SERVER_CPU, loaders on cpu $LOADER_CPU (one thread each), $DURATION per run, $PAIRS pairs"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
SUMMARY="$TMP/summary"
: > "$SUMMARY"
for PROTO in $PROTOCOLS; do
for server in $SERVERS; do
  [[ "$PROTO" == http1 || "$server" == nginx ]] || continue
  case "$PROTO" in http1 | https | h2 | h2c) ;; *) echo "bench-loader: unknown protocol '$PROTO' (http1, https, h2, h2c)" >&2; exit 2 ;; esac
  label=$server
  [[ "$PROTO" == http1 ]] || label="$server/$PROTO"
  lock
  case "$server" in
    nginx) start_nginx ;;
    threads) start_threads ;;
    *) echo "bench-loader: unknown server '$server' (nginx, threads)" >&2; exit 2 ;;
  esac
  wait_listening "$server"
  for c in $CONNS; do
    for pair in $(seq "$PAIRS"); do
      if (( pair % 2 )); then
        read -r w_rps w_n w_cpu < <(run_ref "$c")
        read -r f_rps f_n f_cpu < <(run_fg "$c")
      else
        read -r f_rps f_n f_cpu < <(run_fg "$c")
        read -r w_rps w_n w_cpu < <(run_ref "$c")
      fi
      echo "$label $c $w_rps $w_n $w_cpu $f_rps $f_n $f_cpu" >> "$SUMMARY"
      python3 - "$label" "$c" "$pair" "$w_rps" "$w_n" "$w_cpu" "$f_rps" "$f_n" "$f_cpu" <<'PY'
import os, sys
s, c, pair = sys.argv[1:4]
w_rps, w_n, w_cpu, f_rps, f_n, f_cpu = map(float, sys.argv[4:])
wpr, fpr = w_cpu * 1e6 / w_n, f_cpu * 1e6 / f_n
ref = os.environ.get("REF_NAME") or ("h2load" if s.endswith(("/h2", "/h2c")) else "wrk")
print(f"  {s:11} c={c:<5} pair {pair}: {ref} {w_rps:9.0f} req/s {wpr:6.2f} us CPU/resp | "
      f"fairground {f_rps:9.0f} req/s {fpr:6.2f} us CPU/resp | req/s ratio {f_rps / w_rps:.3f}, CPU ratio {fpr / wpr:.3f}")
PY
    done
  done
  stop_server
  unlock
done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$SUMMARY" <<'PY'
import os, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    s, c, *v = line.split()
    rows.setdefault((s, int(c)), []).append(list(map(float, v)))
print("summary (medians over pairs; goals: http1 req/s ratio >= 1.3 and CPU ratio <= 0.75; https, h2, h2c >= 1.0 and <= 1.0):")
for (s, c), pairs in rows.items():
    ref = os.environ.get("REF_NAME") or ("h2load" if s.endswith(("/h2", "/h2c")) else "wrk")
    goal_rps, goal_cpu = (1.0, 1.0) if "/" in s else (1.3, 0.75)
    rps_ratio = statistics.median(f_rps / w_rps for w_rps, _, _, f_rps, _, _ in pairs)
    wpr = statistics.median(w_cpu * 1e6 / w_n for _, w_n, w_cpu, _, _, _ in pairs)
    fpr = statistics.median(f_cpu * 1e6 / f_n for _, _, _, _, f_n, f_cpu in pairs)
    cpu_ratio = statistics.median((f_cpu / f_n) / (w_cpu / w_n) for _, w_n, w_cpu, _, f_n, f_cpu in pairs)
    # Two fairground binaries (REF_BIN) have no goal, only a ratio.
    goals = not os.environ.get("REF_BIN")
    meets_rps = f" ({'meets' if rps_ratio >= goal_rps else 'misses'} {goal_rps})" if goals else ""
    meets_cpu = f" ({'meets' if cpu_ratio <= goal_cpu else 'misses'} {goal_cpu})" if goals else ""
    print(f"  {s:11} c={c:<5} vs {ref}: req/s ratio {rps_ratio:.3f}{meets_rps} | "
          f"CPU per response: {ref} {wpr:.2f} us, fairground {fpr:.2f} us, ratio {cpu_ratio:.3f}"
          f"{meets_cpu} | one-core ceiling: {ref} {1e6 / wpr:,.0f} req/s, "
          f"fairground {1e6 / fpr:,.0f} req/s")
PY

#!/usr/bin/env bash
# bench-loader.sh: is `fairground load` at least as fast as wrk on the same core?
#
# nginx (1 worker, `return 200 "Hello, World!"`, 127.0.0.1 only, its own temp
# prefix) is pinned to core 0; wrk and `fairground load` (release build) run in
# turn pinned to core 1, one thread each, alternating A B A B for $PAIRS pairs,
# at 100 and then 1000 connections. Printed per connection count: the median of
# the per-pair ratios fairground req/s / wrk req/s (must be >= 1.0), and each
# loader's CPU time per response (user+sys of the loader process, from bash's
# `time`, divided by the responses it reported). On a busy machine req/s is
# set by the scheduler more than by either loader; CPU per response (and the
# one-core ceiling derived from it) is the steadier measure of loader cost.
#
# A benchmark, not a test: run it on a quiet machine (the load average is
# printed before and after; figures taken under load are noise).
#
# Env: DURATION (default 10s), PAIRS (default 3), PORT (default 18199),
#      CONNS (default "100 1000"), SERVER_CPU (0), LOADER_CPU (1),
#      NO_BUILD=1 to use the existing target/release/fairground.
set -euo pipefail

DURATION=${DURATION:-10s}
PAIRS=${PAIRS:-3}
PORT=${PORT:-18199}
CONNS=${CONNS:-"100 1000"}
SERVER_CPU=${SERVER_CPU:-0}
LOADER_CPU=${LOADER_CPU:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/target/release/fairground"

for tool in nginx wrk taskset python3; do
  command -v "$tool" >/dev/null || { echo "bench-loader: $tool is missing (make deps)" >&2; exit 2; }
done
[[ -n "${NO_BUILD:-}" ]] || (cd "$ROOT" && cargo build --release --locked --quiet)

TMP=$(mktemp -d /tmp/fairground-bench-loader.XXXXXX)
NGINX_PID=""
cleanup() {
  if [[ -n "$NGINX_PID" ]]; then kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/logs" "$TMP/tmp"
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
    listen 127.0.0.1:$PORT backlog=4096;
    default_type text/plain;
    location / { return 200 "Hello, World!"; }
  }
}
CONF
ulimit -n "$(ulimit -Hn)"
taskset -c "$SERVER_CPU" nginx -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/logs/error.log" &
NGINX_PID=$!
for _ in $(seq 50); do
  curl_ok=$(python3 -c "import socket;s=socket.socket();s.settimeout(0.2);print(s.connect_ex(('127.0.0.1',$PORT)))" 2>/dev/null || echo 1)
  [[ "$curl_ok" == "0" ]] && break
  sleep 0.1
done
URL="http://127.0.0.1:$PORT/"

# run_wrk CONNS -> "rps responses cpu_s"
run_wrk() {
  local out cpu
  TIMEFORMAT='%U %S'
  { time taskset -c "$LOADER_CPU" wrk -t1 -c"$1" -d"$DURATION" "$URL" > "$TMP/wrk.out"; } 2> "$TMP/wrk.time"
  cpu=$(awk '{print $1 + $2}' "$TMP/wrk.time")
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
  { time taskset -c "$LOADER_CPU" "$BIN" load --url "$URL" -t 1 -c "$1" -d "$DURATION" --json > "$TMP/fg.json"; } 2> "$TMP/fg.time"
  cpu=$(tail -1 "$TMP/fg.time" | awk '{print $1 + $2}')
  python3 - "$TMP/fg.json" "$cpu" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r["errors_whole_run"] != {k: 0 for k in r["errors_whole_run"]} or r["responses"]["status_2xx"] != r["responses"]["total"]:
    print("fairground reported errors:", r["errors_whole_run"], r["responses"], file=sys.stderr)
print(r["throughput_rps"], r["responses"]["total"], sys.argv[2])
PY
}

echo "bench-loader: nginx on cpu $SERVER_CPU, loaders on cpu $LOADER_CPU, $DURATION per run, $PAIRS pairs"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for c in $CONNS; do
  ratios=()
  wrk_cpu=()
  fg_cpu=()
  for pair in $(seq "$PAIRS"); do
    read -r w_rps w_n w_cpu < <(run_wrk "$c")
    read -r f_rps f_n f_cpu < <(run_fg "$c")
    ratio=$(python3 -c "print(f'{$f_rps / $w_rps:.3f}')")
    wpr=$(python3 -c "print(f'{$w_cpu * 1e6 / $w_n:.2f}')")
    fpr=$(python3 -c "print(f'{$f_cpu * 1e6 / $f_n:.2f}')")
    ratios+=("$ratio"); wrk_cpu+=("$wpr"); fg_cpu+=("$fpr")
    printf "  c=%-5s pair %s: wrk %10.0f req/s (%s us CPU/resp)  fairground %10.0f req/s (%s us CPU/resp)  ratio %s\n" \
      "$c" "$pair" "$w_rps" "$wpr" "$f_rps" "$fpr" "$ratio"
  done
  python3 - "$c" "${ratios[*]}" "${wrk_cpu[*]}" "${fg_cpu[*]}" <<'PY'
import statistics, sys
c, ratios, wcpu, fcpu = sys.argv[1], *[list(map(float, a.split())) for a in sys.argv[2:]]
w, f = statistics.median(wcpu), statistics.median(fcpu)
print(f"c={c}: median ratio fairground/wrk = {statistics.median(ratios):.3f}; "
      f"median CPU per response: wrk {w:.2f} us, fairground {f:.2f} us "
      f"(CPU ceiling of one core: wrk {1e6 / w:,.0f} req/s, fairground {1e6 / f:,.0f} req/s)")
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

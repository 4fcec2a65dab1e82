#!/usr/bin/env bash
# bench-grpc-loader.sh: how fast is `fairground load --scenario grpc-unary`
# next to h2load driving the same bytes on the same core?
#
# The reference server, `fairground serve --protocol h2c --threads 1`, is
# pinned to core $SERVER_CPU and listens on 127.0.0.1 only; it answers
# fairground.bench.Bench/Echo (docs/contract.md, "gRPC scenarios"). Two
# loaders, one thread each, run in turn pinned to core $LOADER_CPU against
# it with the same connections ($CONNS) and streams per connection
# ($STREAMS), $DURATION each:
#   fairground  `fairground load --scenario grpc-unary --protocol h2c -t 1`:
#               a pool of random Echo calls (64-byte payloads), every reply
#               decoded and compared, grpc-status read from the trailers;
#   anchor      h2load (nghttp2-client) POSTing one Echo call of the same
#               size (`-d` a length-prefixed EchoRequest, the gRPC headers
#               with `-H`, the deadline fairground's default 2 s timeout
#               sends): the same frames, nothing checked but the HTTP
#               status.
# No gRPC load tool is packaged in Debian bookworm (ghz is not; grpcurl
# sends one call), so h2load on the same bytes is the anchor: what HTTP/2
# framing costs a fast C client, without any gRPC check.
# Pairs alternate which runs first. Printed per pair and as medians:
#   calls/s ratio   fairground / h2load (server-bound when the server's core
#                   is full: then both read its ceiling)
#   CPU ratio       fairground CPU per answer / h2load's (whole process,
#                   `time`, over the answers it reported: h2load all of its
#                   run, fairground those of its window; goal <= 1.0)
# A benchmark, not a test. It holds the shared measurement lock ($LOCK) while
# it measures. Env: DURATION (5s), PAIRS (5), CONNS (16), STREAMS (8), PORT
# (18399), SERVER_CPU (0), LOADER_CPU (1), LOCK (/tmp/fairground-docker.lock;
# empty: no lock), NO_BUILD=1 to use the existing target/release/fairground.
set -euo pipefail

DURATION=${DURATION:-5s}
PAIRS=${PAIRS:-5}
CONNS=${CONNS:-16}
STREAMS=${STREAMS:-8}
PORT=${PORT:-18399}
SERVER_CPU=${SERVER_CPU:-0}
LOADER_CPU=${LOADER_CPU:-1}
LOCK=${LOCK-/tmp/fairground-docker.lock}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/target/release/fairground
secs=${DURATION%s}
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "bench-grpc-loader: DURATION must be whole seconds, like 5s" >&2; exit 2; }
RUN_LIMIT=$((secs + 30))

for tool in h2load taskset python3 flock timeout; do
  command -v "$tool" >/dev/null || { echo "bench-grpc-loader: $tool is missing (make deps: nghttp2-client)" >&2; exit 2; }
done
[[ -n "${NO_BUILD:-}" ]] || (cd "$ROOT" && cargo build --release --locked --quiet)
[[ -x "$BIN" ]] || { echo "bench-grpc-loader: no fairground binary at $BIN" >&2; exit 2; }

TMP=$(mktemp -d /tmp/fairground-bench-grpc.XXXXXX)
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One Echo call as gRPC frames it: flag 0, 4-byte length, then the
# EchoRequest (field 1: a varint id; field 2: 64 bytes of payload).
python3 - "$TMP/echo.bin" <<'PY'
import os, random, struct, sys
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)
msg = b"\x08" + varint(random.getrandbits(63)) + b"\x12" + varint(64) + os.urandom(64)
open(sys.argv[1], "wb").write(b"\x00" + struct.pack(">I", len(msg)) + msg)
PY

[[ -z "$LOCK" ]] || { exec 9>>"$LOCK"; flock 9; }
SERVER_LIFE=$(( 2 * RUN_LIMIT * PAIRS + 60 ))
timeout "$SERVER_LIFE" taskset -c "$SERVER_CPU" "$BIN" serve --bind 127.0.0.1 --port "$PORT" --threads 1 --protocol h2c > "$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
  if python3 -c "import socket,sys;s=socket.socket();s.settimeout(0.2);sys.exit(s.connect_ex(('127.0.0.1',$PORT)))" 2>/dev/null; then break; fi
  sleep 0.1
done
URL="http://127.0.0.1:$PORT"

# run_anchor -> "rps answers cpu_s"
run_anchor() {
  local cpu
  TIMEFORMAT='%U %S'
  { time timeout "$RUN_LIMIT" taskset -c "$LOADER_CPU" h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$secs" \
      -d "$TMP/echo.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
      -H 'grpc-timeout: 2000000u' \
      "$URL/fairground.bench.Bench/Echo" > "$TMP/h2load.out"; } 2> "$TMP/h2load.time"
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

# run_fg -> "rps answers cpu_s"
run_fg() {
  local cpu
  TIMEFORMAT='%U %S'
  { time timeout "$RUN_LIMIT" taskset -c "$LOADER_CPU" "$BIN" load --url "$URL" --protocol h2c --scenario grpc-unary \
      -t 1 -c "$CONNS" --streams "$STREAMS" -d "$DURATION" --json > "$TMP/fg.json"; } 2> "$TMP/fg.time"
  cpu=$(tail -1 "$TMP/fg.time" | awk '{print $1 + $2}')
  python3 - "$TMP/fg.json" "$cpu" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
total = sum(r["responses"].values())
if any(r["errors_whole_run"].values()) or r["responses"]["status_2xx"] != total or r["answers"]["wrong"]:
    print("fairground reported errors:", r["errors_whole_run"], r["responses"], r["answers"], file=sys.stderr)
print(r["throughput_rps"], total, sys.argv[2])
PY
}

echo "bench-grpc-loader: server (fairground serve --protocol h2c --threads 1) on cpu $SERVER_CPU, loaders on cpu $LOADER_CPU" \
  "(one thread each), $CONNS connections x $STREAMS streams, $DURATION per run, $PAIRS pairs"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
SUMMARY="$TMP/summary"
: > "$SUMMARY"
for pair in $(seq "$PAIRS"); do
  if (( pair % 2 )); then
    read -r a_rps a_n a_cpu < <(run_anchor)
    read -r f_rps f_n f_cpu < <(run_fg)
  else
    read -r f_rps f_n f_cpu < <(run_fg)
    read -r a_rps a_n a_cpu < <(run_anchor)
  fi
  echo "$a_rps $a_n $a_cpu $f_rps $f_n $f_cpu" >> "$SUMMARY"
  python3 - "$pair" "$a_rps" "$a_n" "$a_cpu" "$f_rps" "$f_n" "$f_cpu" <<'PY'
import sys
pair = sys.argv[1]
a_rps, a_n, a_cpu, f_rps, f_n, f_cpu = map(float, sys.argv[2:])
apr, fpr = a_cpu * 1e6 / a_n, f_cpu * 1e6 / f_n
print(f"  pair {pair}: h2load {a_rps:9.0f} calls/s {apr:6.2f} us CPU/answer | "
      f"fairground {f_rps:9.0f} calls/s {fpr:6.2f} us CPU/answer | calls/s ratio {f_rps / a_rps:.3f}, CPU ratio {fpr / apr:.3f}")
PY
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$SUMMARY" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
rps = st.median(f / a for a, _, _, f, _, _ in rows)
cpu = st.median((fc / fn) / (ac / an) for _, an, ac, _, fn, fc in rows)
apr = st.median(ac * 1e6 / an for _, an, ac, _, _, _ in rows)
fpr = st.median(fc * 1e6 / fn for _, _, _, _, fn, fc in rows)
print(f"summary (medians over pairs): calls/s ratio {rps:.3f} ({'meets' if rps >= 1.0 else 'misses'} 1.0) | "
      f"CPU per answer: h2load {apr:.2f} us, fairground {fpr:.2f} us, ratio {cpu:.3f} ({'meets' if cpu <= 1.0 else 'misses'} 1.0)")
PY

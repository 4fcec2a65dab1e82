#!/usr/bin/env bash
# bench-order.sh: how precisely does a run order a roster, by design? Two
# designs of the same comparison, run alternately (A B A B … on the same
# machine, so drift hits both alike), each printing its wall time and the
# run's own precision line (results.json `precision`: median 95% interval
# of req/s, median rank-group width, whether ranks were paired by block)
# and every cell's rank.
#
#   back-to-back  today's `standard` design: each framework's rounds in a
#                 row on one server, 1 s warm-up + 3 s window, 3 rounds
#   blocks        rounds interleaved in blocks (a fresh server each round,
#                 frameworks shuffled per block), 1 s warm-up + 2 s window,
#                 BLOCKS rounds; ranks and compare judged block by block
#
# A benchmark, not a test: it loads only the run's own containers on the
# run's own network. Env: FRAMEWORKS ("node-http hyper go-nethttp"),
# SCENARIOS ("plaintext, json"), BLOCKS (6), PASSES (1), LOCK
# (/tmp/fairground-docker.lock; empty: no lock), BIN (default
# target/x86_64-unknown-linux-gnu/release/fairground: `make static`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
FRAMEWORKS=${FRAMEWORKS:-"node-http hyper go-nethttp"}
SCENARIOS=${SCENARIOS:-"plaintext, json"}
BLOCKS=${BLOCKS:-6}
PASSES=${PASSES:-1}
LOCK=${LOCK-/tmp/fairground-docker.lock}
BIN=${BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/fairground}
export FAIRGROUND_STATIC_BIN=${FAIRGROUND_STATIC_BIN:-$BIN}
export FAIRGROUND_KEEP_SUPERSEDED=1
[ -x "$BIN" ] || { echo "no fairground binary at $BIN: make static" >&2; exit 1; }

WORK=$(mktemp -d /tmp/bench-order.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# One profile: $1 name, $2 window, $3 rounds, $4 extra line.
profile() {
  local fws
  fws=$(echo "$FRAMEWORKS" | sed 's/ \+/, /g')
  cat >"$WORK/$1.yaml" <<EOF
description: "order study: $1"
frameworks: [$fws]
scenarios: [$SCENARIOS]
concurrency: [50]
warmup: 1s
duration: $2
rounds: $3
idle_settle: 1s
load: {mode: closed, threads: 1, timeout: 5s}
server: {cpus: 1, cpuset: auto, memory: 1GiB, nofile: 16384}
loader: {cpus: 1, cpuset: auto, memory: 1GiB, nofile: 16384}
thresholds: {preflight: warn}
$4
EOF
}
profile back-to-back 3s 3 ""
profile blocks 2s "$BLOCKS" "interleave_rounds: true"

run() {
  local v=$1 out=$WORK/out-$1-$RANDOM start end
  local cmd=("$BIN" run --profile "$WORK/$v.yaml" --output "$out")
  if [ -n "$LOCK" ]; then cmd=(flock "$LOCK" "${cmd[@]}"); fi
  start=$(date +%s)
  "${cmd[@]}" >"$out.log" 2>&1 || { echo "run failed: $out.log" >&2; tail -20 "$out.log" >&2; exit 1; }
  end=$(date +%s)
  python3 - "$v" "$((end - start))" "$out"/*/results.json <<'PY'
import json, sys
variant, secs, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.load(open(path))
p = r.get("precision") or {}
mi = p.get("median_interval")
mw = p.get("median_rank_width")
print(f"{variant:<13} {secs:>5} s  median interval "
      f"{'±%.1f%%' % (100 * mi) if mi is not None else '–':>7}  "
      f"median rank width {mw if mw is not None else '–'}  paired {p.get('paired')}")
for c in sorted(r["cells"], key=lambda c: (c["key"]["scenario"], c["key"]["framework"])):
    g = c.get("rank") or {}
    pr = c.get("precision") or {}
    rank = (f'#{g["low"]}' if g.get("low") == g.get("high") else f'#{g.get("low")}-{g.get("high")}') if g else "–"
    reached = pr.get("reached")
    print(f'    {c["key"]["scenario"]:<10} {c["key"]["framework"]:<12} {len(c["rounds"]):>2} rounds '
          f'{c["summary"]["throughput_rps"]["median"]:>10,.0f} req/s  '
          f'{"±%.1f%%" % (100 * reached) if reached is not None else "–":>7}  {rank}')
PY
}

echo "binary: $BIN; frameworks: $FRAMEWORKS; scenarios: $SCENARIOS; blocks: $BLOCKS; passes: $PASSES"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for pass in $(seq 1 "$PASSES"); do
  run back-to-back
  run blocks
done

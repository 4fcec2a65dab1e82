#!/usr/bin/env bash
# bench-rounds.sh: how much wall time does a run spend beyond the load it was
# asked for? Two orchestrators side by side on the same daemon, images and
# fairground image: BASE (by default `main`, built here) and NEW (this
# checkout), each running the same two profiles on plainfw copies (the
# std-only fixture, tests/fixtures/run/frameworks/plainfw; quick to build):
#   quick-like     3 frameworks x 2 cells (c=50, c=100) x 1 round,
#                  warm-up 2 s + window 5 s, idle settle 1 s (profiles/quick.yaml's
#                  shape: 6 rounds of 7 s);
#   standard-like  2 frameworks x 2 cells x 3 rounds, warm-up 1 s + window 3 s,
#                  idle settle 2 s, no restart (profiles/standard.yaml's shape).
# The order of BASE and NEW flips every pair. Printed per run: the ratio
# R = first round to end / (warm-up + window), as results.json's `timing`
# has it (goal <= 1.05), and the phases beyond the load, summed over the run
# (s). Each run holds the Docker lock ($LOCK) while it runs.
#
# A benchmark, not a test. Env: PAIRS (1), LOCK (/tmp/fairground-docker.lock;
# empty: no lock), BASE_BIN (a fairground binary to compare against; default:
# `git archive main` built in target/base), NEW_BIN (default target/debug/
# fairground, built here), FAIRGROUND_STATIC_BIN (the image's binary; default
# target/x86_64-unknown-linux-gnu/release/fairground: `make static`),
# PROFILES ("quick-like standard-like").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PAIRS=${PAIRS:-1}
LOCK=${LOCK-/tmp/fairground-docker.lock}
PROFILES=${PROFILES:-"quick-like standard-like"}
export FAIRGROUND_KEEP_SUPERSEDED=1
export FAIRGROUND_STATIC_BIN=${FAIRGROUND_STATIC_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/fairground}
[ -x "$FAIRGROUND_STATIC_BIN" ] || { echo "no static binary: make static" >&2; exit 1; }

if [ -z "${NEW_BIN:-}" ]; then
  cargo build --locked -q
  NEW_BIN=$ROOT/target/debug/fairground
fi
if [ -z "${BASE_BIN:-}" ]; then
  rm -rf target/base-src && mkdir -p target/base-src
  git archive main | tar -x -C target/base-src
  (cd target/base-src && CARGO_TARGET_DIR=$ROOT/target/base cargo build --locked -q)
  BASE_BIN=$ROOT/target/base/debug/fairground
fi

WORK=$(mktemp -d /tmp/bench-rounds.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FIX=tests/fixtures/run/frameworks/plainfw
for n in rp1 rp2 rp3; do
  mkdir -p "$WORK/frameworks/$n/src"
  cp "$FIX"/Cargo.toml "$FIX"/Cargo.lock "$FIX"/Dockerfile "$WORK/frameworks/$n/"
  cp "$FIX"/src/main.rs "$WORK/frameworks/$n/src/"
  sed "s/name: plainfw/name: $n/" "$FIX/framework.yaml" >"$WORK/frameworks/$n/framework.yaml"
done

common='scenarios: [plaintext]
concurrency: [50, 100]
load: {threads: 1, timeout: 5s}
server: {cpus: 1, cpuset: auto, memory: 256MiB, nofile: 16384}
loader: {cpus: 1, cpuset: auto, memory: 256MiB, nofile: 16384,
         sysctls: {net.ipv4.ip_local_port_range: "1024 65535", net.ipv4.tcp_tw_reuse: 1}}
network: bridge
readiness_timeout: 30s
thresholds: {preflight: warn}'
cat >"$WORK/quick-like.yaml" <<EOF
description: "quick-like: 6 rounds of 2 s + 5 s"
frameworks: [rp1, rp2, rp3]
warmup: 2s
duration: 5s
rounds: 1
restart_between_rounds: false
idle_settle: 1s
$common
EOF
cat >"$WORK/standard-like.yaml" <<EOF
description: "standard-like: 12 rounds of 1 s + 3 s"
frameworks: [rp1, rp2]
warmup: 1s
duration: 3s
rounds: 3
restart_between_rounds: false
idle_settle: 2s
$common
EOF

# One run; prints "R beyond-load-phases" from its results.json.
run() {
  local bin=$1 profile=$2 out=$WORK/out-$RANDOM
  local cmd=("$bin" run --profile "$WORK/$profile.yaml" --frameworks "$WORK/frameworks" --output "$out")
  if [ -n "$LOCK" ]; then cmd=(flock "$LOCK" "${cmd[@]}"); fi
  "${cmd[@]}" >"$out.log" 2>&1 || { echo "run failed: $out.log" >&2; tail -20 "$out.log" >&2; exit 1; }
  python3 - "$out"/*/results.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timing"]
p = t["phases"]
load = p["warmup_s"] + p["window_s"]
keys = ["start_s", "readiness_s", "settle_s", "verify_s", "loader_start_s", "connect_s",
        "drain_s", "loader_exit_s", "sampling_s", "teardown_s", "between_s"]
print(f'{t["first_round_to_end_s"] / load:.3f} {t["first_round_to_end_s"]:.1f} {load:.1f} '
      + " ".join(f'{k[:-2]}={p[k]:.2f}' for k in keys if p[k] >= 0.005))
PY
}

echo "base: $BASE_BIN"
echo "new:  $NEW_BIN"
echo "image binary: $FAIRGROUND_STATIC_BIN"
printf '%-14s %-5s %-4s %6s %7s %7s  %s\n' profile side pair R "end(s)" "load(s)" "phases beyond the load (s, summed)"
for profile in $PROFILES; do
  for pair in $(seq 1 "$PAIRS"); do
    if [ $((pair % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
    for side in $order; do
      if [ "$side" = base ]; then bin=$BASE_BIN; else bin=$NEW_BIN; fi
      read -r r end load rest < <(run "$bin" "$profile")
      printf '%-14s %-5s %-4s %6s %7s %7s  %s\n' "$profile" "$side" "$pair" "$r" "$end" "$load" "$rest"
    done
  done
done

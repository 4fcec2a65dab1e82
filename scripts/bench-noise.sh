#!/usr/bin/env bash
# bench-noise.sh: where does the round-to-round spread of one framework come
# from on this machine? An A/A study: the same framework, the same load
# (plaintext, 100 connections, closed loop, server and loader pinned to one
# core each), many rounds, under one variant of what fairground controls at a
# time. Printed per variant and framework: the rounds' CV of req/s and of
# server CPU µs per request, the CV of the calibration probe's exchange (the
# machine's own speed, docs/results.md `machine`), their correlation with
# req/s, the 95% interval fairground gives the figure (±%), the machine time
# one round took (s/round: the run's time from its first round to its end over
# its rounds, so server starts, warm-ups and loader starts count) and what
# that buys: the 95% interval the same CV gives over the rounds one minute of
# machine time holds (±/min: Student's t over floor(60 / s/round) rounds), the
# figure to choose a window by (issue 37).
#
# Variants (VARIANTS selects; all by default):
#   window-1s window-2s window-3s window-5s window-10s window-30s
#                 the measured window's length (any window-Ns works)
#   restart       a fresh server before each round (restart_between_rounds)
#   interleave    frameworks alternate round by round (each round a fresh server)
#   interleave-Ns the same with an N s window
#   orch-core0    the orchestrator (fairground run, its sampler and probe
#                 threads) held on core 0, the server's core (taskset)
#   orch-core1    ... on core 1, the loader's core
# The variants run one after another, FRAMEWORKS in each; rerun with PASSES=2
# to see the same variant twice (a variant that moves between passes is not
# the cause). Each run holds the Docker lock ($LOCK) while it runs.
#
# A benchmark, not a test: it loads only the run's own containers on the
# run's own network. Env: FRAMEWORKS ("go-nethttp hyper"), ROUNDS (8, window
# 30 s: 4), VARIANTS, PASSES (1), LOCK (/tmp/fairground-docker.lock; empty: no
# lock), BIN (default target/x86_64-unknown-linux-gnu/release/fairground:
# `make static`, also the image's binary).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
FRAMEWORKS=${FRAMEWORKS:-"go-nethttp hyper"}
ROUNDS=${ROUNDS:-8}
VARIANTS=${VARIANTS:-"window-1s window-3s window-10s window-30s restart interleave orch-core0 orch-core1"}
PASSES=${PASSES:-1}
LOCK=${LOCK-/tmp/fairground-docker.lock}
BIN=${BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/fairground}
export FAIRGROUND_STATIC_BIN=${FAIRGROUND_STATIC_BIN:-$BIN}
export FAIRGROUND_KEEP_SUPERSEDED=1
[ -x "$BIN" ] || { echo "no fairground binary at $BIN: make static" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores: server and loader on one each" >&2; exit 1; }

WORK=$(mktemp -d /tmp/bench-noise.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# One profile: $1 name, $2 window, $3 rounds, $4 extra lines.
profile() {
  local fws
  fws=$(echo "$FRAMEWORKS" | sed 's/ \+/, /g')
  cat >"$WORK/$1.yaml" <<EOF
description: "noise study: $1"
frameworks: [$fws]
scenarios: [plaintext]
concurrency: [100]
warmup: 2s
duration: $2
rounds: $3
idle_settle: 2s
load: {mode: closed, threads: 1, timeout: 5s}
server: {cpus: 1, cpuset: auto, memory: 1GiB, nofile: 16384}
loader: {cpus: 1, cpuset: auto, memory: 1GiB, nofile: 16384}
thresholds: {preflight: warn}
$4
EOF
}

# The profile and the command prefix of a variant.
setup() {
  local v=$1
  PREFIX=()
  case "$v" in
    window-30s) profile "$v" 30s $((ROUNDS / 2)) "" ;;
    window-*) profile "$v" "${v#window-}" "$ROUNDS" "" ;;
    interleave-*) profile "$v" "${v#interleave-}" "$ROUNDS" "interleave_rounds: true" ;;
    restart) profile "$v" 3s "$ROUNDS" "restart_between_rounds: true" ;;
    interleave) profile "$v" 3s "$ROUNDS" "interleave_rounds: true" ;;
    orch-core0) profile "$v" 3s "$ROUNDS" ""; PREFIX=(taskset -c 0) ;;
    orch-core1) profile "$v" 3s "$ROUNDS" ""; PREFIX=(taskset -c 1) ;;
    *) echo "unknown variant $v" >&2; exit 2 ;;
  esac
}

# Run variant $1; print one line per framework from its results.json.
run() {
  local v=$1 out=$WORK/out-$1-$RANDOM
  setup "$v"
  local cmd=("${PREFIX[@]}" "$BIN" run --profile "$WORK/$v.yaml" --output "$out")
  if [ -n "$LOCK" ]; then cmd=(flock "$LOCK" "${cmd[@]}"); fi
  "${cmd[@]}" >"$out.log" 2>&1 || { echo "run failed: $out.log" >&2; tail -20 "$out.log" >&2; exit 1; }
  python3 - "$v" "$out"/*/results.json <<'PY'
import json, statistics as st, sys
variant, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))
def cv(xs):
    xs = [x for x in xs if x is not None]
    return st.stdev(xs) / st.mean(xs) if len(xs) >= 2 and st.mean(xs) else float("nan")
def corr(a, b):
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if len(pairs) < 3:
        return float("nan")
    xs, ys = zip(*pairs)
    try:
        return st.correlation(xs, ys)
    except st.StatisticsError:
        return float("nan")
# Two-sided 95% quantiles of Student's t by degrees of freedom.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
       8: 2.306, 9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086,
       25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}
def t95(df):
    return T95[max(k for k in T95 if k <= df)] if df < 1000 else 1.960
total_rounds = sum(len(c["rounds"]) for c in r["cells"])
per_round = (r.get("timing") or {}).get("first_round_to_end_s", 0) / max(total_rounds, 1)
def per_minute(cv_rps):
    n = int(60 // per_round) if per_round > 0 else 0
    if n < 2 or cv_rps != cv_rps:
        return "–"
    return "±%.1f%%" % (100 * t95(n - 1) * cv_rps / n ** 0.5)
for c in r["cells"]:
    rounds = c["rounds"]
    rps = [x["throughput_rps"] for x in rounds]
    cpu = [x["server"].get("cpu_us_per_request") for x in rounds]
    probe = [(x.get("machine") or {}).get("exchange_ns") for x in rounds]
    p = c.get("precision") or {}
    reached = p.get("reached")
    print(f'{variant:<12} {c["key"]["framework"]:<12} {len(rounds):>3} '
          f'{st.median(rps):>10,.0f} {100 * cv(rps):>7.1f} {100 * cv(cpu):>7.1f} '
          f'{100 * cv(probe):>7.1f} {corr(probe, rps):>+7.2f} '
          f'{"±%.1f%%" % (100 * reached) if reached is not None else "–":>8} '
          f'{per_round:>7.1f} {per_minute(cv(rps)):>7}  '
          f'{" ".join(f"{x:,.0f}" for x in rps)}')
PY
}

echo "binary: $BIN; frameworks: $FRAMEWORKS; rounds: $ROUNDS; passes: $PASSES"
printf '%-12s %-12s %3s %10s %7s %7s %7s %7s %8s %7s %7s  %s\n' \
  variant framework n "req/s" "CV%" "cpu CV%" "prb CV%" "r(prb)" "95% ±" "s/round" "±/min" "req/s per round"
for pass in $(seq 1 "$PASSES"); do
  for v in $VARIANTS; do
    run "$v"
  done
done

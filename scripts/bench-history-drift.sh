#!/usr/bin/env bash
# bench-history-drift.sh: how far do runs of an unchanged server drift apart
# on this machine, beyond their rounds' own spread, and does `fairground
# history` call that drift a change? An A/A series: RUNS runs of the same
# profile, one after another, nothing changed between them.
#
# Prints, per cell and figure (req/s, server CPU µs per request): the σ of a
# round's log value around its run's mean (within), and the σ of the runs'
# log means beyond what the rounds explain (between: sqrt(var(run means) −
# within²/rounds), 0 when negative); then what `fairground history` found in
# the series (every change point in an A/A series is a false alarm). The σs
# are what src/history/simulated.rs takes as this machine's noise;
# docs/history.md quotes both.
#
# A benchmark, not a test: it loads only the runs' own containers on their
# own networks. Env: FRAMEWORKS ("go-nethttp hyper"), RUNS (10), ROUNDS (3),
# WINDOW (3s), LOCK (/tmp/fairground-docker.lock; empty: no lock), BIN
# (target/x86_64-unknown-linux-gnu/release/fairground: `make static`),
# KEEP (a directory to keep the runs in; default: a temporary one, removed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
FRAMEWORKS=${FRAMEWORKS:-"go-nethttp hyper"}
RUNS=${RUNS:-10}
ROUNDS=${ROUNDS:-3}
WINDOW=${WINDOW:-3s}
LOCK=${LOCK-/tmp/fairground-docker.lock}
BIN=${BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/fairground}
export FAIRGROUND_STATIC_BIN=${FAIRGROUND_STATIC_BIN:-$BIN}
[ -x "$BIN" ] || { echo "no fairground binary at $BIN: make static" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores: server and loader on one each" >&2; exit 1; }

WORK=$(mktemp -d /tmp/bench-history-drift.XXXXXX)
RUNS_DIR=${KEEP:-$WORK/runs}
mkdir -p "$RUNS_DIR"
trap 'rm -rf "$WORK"' EXIT

fws=$(echo "$FRAMEWORKS" | sed 's/ \+/, /g')
cat >"$WORK/aa.yaml" <<EOF
description: "history drift study: the same servers, run after run"
frameworks: [$fws]
scenarios: [plaintext]
concurrency: [100]
warmup: 2s
duration: $WINDOW
rounds: $ROUNDS
idle_settle: 2s
load: {mode: closed, threads: 1, timeout: 5s}
server: {cpus: 1, cpuset: auto, memory: 1GiB, nofile: 16384}
loader: {cpus: 1, cpuset: auto, memory: 1GiB, nofile: 16384}
thresholds: {preflight: warn}
EOF

echo "binary: $BIN; frameworks: $FRAMEWORKS; $RUNS runs of $ROUNDS rounds of $WINDOW"
for i in $(seq 1 "$RUNS"); do
  cmd=("$BIN" run --profile "$WORK/aa.yaml" --output "$RUNS_DIR")
  if [ -n "$LOCK" ]; then cmd=(flock "$LOCK" "${cmd[@]}"); fi
  "${cmd[@]}" >"$WORK/run-$i.log" 2>&1 || { echo "run $i failed:" >&2; tail -20 "$WORK/run-$i.log" >&2; exit 1; }
  echo "run $i/$RUNS done $(date -u +%H:%M:%S)"
done

python3 - "$RUNS_DIR" <<'PY'
import glob, json, math, os, statistics as st, sys
runs = sorted(glob.glob(os.path.join(sys.argv[1], "*", "results.json")))
series = {}
for path in runs:
    r = json.load(open(path))
    for c in r["cells"]:
        if c["verdict"]["status"] == "rejected":
            continue
        k = c["key"]
        name = f'{k["framework"]} {k["scenario"]} c={k["concurrency"]}'
        for fig, get in (("req/s", lambda x: x["throughput_rps"]),
                         ("CPU/req", lambda x: x["server"].get("cpu_us_per_request"))):
            vals = [get(x) for x in c["rounds"]]
            vals = [math.log(v) for v in vals if v]
            if len(vals) >= 2:
                series.setdefault((name, fig), []).append(vals)
print(f'{"cell":<28} {"figure":<8} {"runs":>4} {"within σ":>9} {"between σ":>10} {"run means (ratio to first)"}')
for (name, fig), rs in sorted(series.items()):
    within = math.sqrt(st.mean([st.variance(r) for r in rs]))
    k = st.mean([len(r) for r in rs])
    means = [st.mean(r) for r in rs]
    between = math.sqrt(max(0.0, st.variance(means) - within ** 2 / k)) if len(means) >= 2 else float("nan")
    print(f'{name:<28} {fig:<8} {len(rs):>4} {100 * within:>8.2f}% {100 * between:>9.2f}%  '
          + " ".join(f"{math.exp(m - means[0]):.3f}" for m in means))
PY

echo
echo "fairground history over the $RUNS runs (an A/A series: every change point is a false alarm):"
"$BIN" history "$RUNS_DIR" --out "$WORK/history" | tail -15

#!/usr/bin/env bash
# bench-db-settle.sh: what the nudges save in a database framework's
# verification (docs/contract.md, "How work is counted").
#
# PostgreSQL 15 backends keep their row counts up to 10 s after a burst;
# verification reads a burst's work once the counts reach what the answers
# need. Without nudges it waits for the backends' idle timer; with them it
# sends a few requests a second after the burst, which make the backends
# flush at once. This runs `fairground verify NAME` on the database
# scenarios with two binaries in turn, in pairs whose order flips, and
# prints each run's wall time and the median ratio new / old.
#
# Env: OLD (a fairground binary without nudges, e.g. a static build of
# aa7a748), NEW (default: this checkout's static binary), FRAMEWORK
# (default actix-web), PAIRS (default 2), LOCK (the shared Docker lock).
# A benchmark, not a test; it starts and removes its own containers.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NEW=${NEW:-$ROOT/target/x86_64-unknown-linux-gnu/release/fairground}
OLD=${OLD:?set OLD to a fairground binary without nudges}
FRAMEWORK=${FRAMEWORK:-actix-web}
PAIRS=${PAIRS:-2}
LOCK=${LOCK-/tmp/fairground-docker.lock}
SCENARIOS=db,queries,fortunes,updates
cd "$ROOT"

one() { # binary -> seconds of one verification (exit status checked)
  local start end
  start=$(date +%s.%N)
  if [[ -n "$LOCK" ]]; then
    flock "$LOCK" timeout 900 "$1" verify "$FRAMEWORK" --scenario "$SCENARIOS" >/tmp/bench-db-settle.$$.log 2>&1
  else
    timeout 900 "$1" verify "$FRAMEWORK" --scenario "$SCENARIOS" >/tmp/bench-db-settle.$$.log 2>&1
  fi || { echo "bench-db-settle: verify failed with $1:" >&2; tail -20 /tmp/bench-db-settle.$$.log >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

echo "verify $FRAMEWORK ($SCENARIOS), $PAIRS pairs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
ratios=()
for p in $(seq 1 "$PAIRS"); do
  if (( p % 2 )); then o=$(one "$OLD"); n=$(one "$NEW"); else n=$(one "$NEW"); o=$(one "$OLD"); fi
  r=$(echo "scale=3; $n / $o" | bc)
  printf 'pair %d: without nudges %6.1f s, with %6.1f s, ratio %s\n' "$p" "$o" "$n" "$r"
  ratios+=("$r")
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
echo "median ratio with / without nudges: $median"
rm -f /tmp/bench-db-settle.$$.log

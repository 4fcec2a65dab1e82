#!/usr/bin/env bash
# bench-report.sh: how long does `fairground report` take to write a run's
# reports (report.html the largest of them), BASE against NEW? Made for the
# move of report.html from hand-escaped format! strings to maud templates
# (issue 25): BASE defaults to 36b38e4, the last commit before it.
#
# Both binaries are release builds of this machine; each rewrites the
# reports of its own copy of the same run directory, PAIRS times, the order
# of BASE and NEW flipped every pair (the machine is shared: what drifts
# hits both). Printed: each side's median and min wall time in ms, the
# ratio NEW/BASE of the medians, the size of each report.html, and whether
# the two pages are the same once whitespace between tags and the escaping
# of ' (maud leaves it as it is in text and double-quoted attributes) are
# set aside.
#
# A benchmark, not a test. Env: BASE_REV (36b38e4), PAIRS (15), RESULTS (a
# results.json; default tests/fixtures/results/results.json, a real
# standard run), BASE_BIN / NEW_BIN (skip the builds).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BASE_REV=${BASE_REV:-36b38e4}
PAIRS=${PAIRS:-15}
RESULTS=${RESULTS:-$ROOT/tests/fixtures/results/results.json}
[ -f "$RESULTS" ] || { echo "no results.json at $RESULTS" >&2; exit 1; }

if [ -z "${NEW_BIN:-}" ]; then
  cargo build --release --locked -q
  NEW_BIN=$ROOT/target/release/fairground
fi
if [ -z "${BASE_BIN:-}" ]; then
  src=$ROOT/target/bench-report-base
  rm -rf "$src" && mkdir -p "$src"
  git archive "$BASE_REV" | tar -x -C "$src"
  (cd "$src" && CARGO_TARGET_DIR=$ROOT/target/bench-report-base-target \
     cargo build --release --locked -q)
  BASE_BIN=$ROOT/target/bench-report-base-target/release/fairground
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for side in base new; do
  mkdir -p "$work/$side"
  cp "$RESULTS" "$work/$side/results.json"
done

# One timed rewrite: wall ms on stdout.
run() {
  local bin=$1 dir=$2 t0 t1
  t0=$(date +%s%N)
  "$bin" report "$dir" 2>/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}

# One untimed rewrite each first: page cache and binary warm.
run "$BASE_BIN" "$work/base" >/dev/null
run "$NEW_BIN" "$work/new" >/dev/null
: >"$work/base.ms"
: >"$work/new.ms"
for i in $(seq 1 "$PAIRS"); do
  if [ $((i % 2)) -eq 1 ]; then
    run "$BASE_BIN" "$work/base" >>"$work/base.ms"
    run "$NEW_BIN" "$work/new" >>"$work/new.ms"
  else
    run "$NEW_BIN" "$work/new" >>"$work/new.ms"
    run "$BASE_BIN" "$work/base" >>"$work/base.ms"
  fi
done

median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
minimum() { sort -n "$1" | head -1; }
mb=$(median "$work/base.ms")
mn=$(median "$work/new.ms")
echo "input: $RESULTS ($(wc -c <"$RESULTS") bytes), $PAIRS pairs, order flipped each pair"
printf '%-5s %-9s median %6s ms  min %6s ms  report.html %8s bytes\n' \
  BASE "$BASE_REV" "$mb" "$(minimum "$work/base.ms")" "$(wc -c <"$work/base/report.html")"
printf '%-5s %-9s median %6s ms  min %6s ms  report.html %8s bytes\n' \
  NEW "$(git rev-parse --short HEAD)" "$mn" "$(minimum "$work/new.ms")" "$(wc -c <"$work/new/report.html")"
awk -v a="$mb" -v b="$mn" 'BEGIN { printf "ratio NEW/BASE (medians): %.3f\n", b / a }'

# The same page? Compare with whitespace between tags dropped and &#39; read as '.
norm() { tr -d '\n' <"$1" | sed -e "s/&#39;/'/g" -e 's/>[[:space:]]*</></g' -e 's/ *\/>/>/g' -e 's/<\/line>//g'; }
if cmp -s <(norm "$work/base/report.html") <(norm "$work/new/report.html"); then
  echo "report.html: the same page once whitespace and ' are set aside"
else
  echo "report.html: the pages differ beyond whitespace and '; first difference:"
  cmp <(norm "$work/base/report.html" | fold -w 120) <(norm "$work/new/report.html" | fold -w 120) || true
  diff <(norm "$work/base/report.html" | fold -w 120) <(norm "$work/new/report.html" | fold -w 120) | head -20 || true
fi

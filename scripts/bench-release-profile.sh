#!/usr/bin/env bash
# bench-release-profile.sh: which release profile should fairground ship?
#
# The static binary is what a new user waits for first (`make bench` compiles
# it before anything runs) and what the loader runs. This compiles the static
# binary once per candidate profile, each from nothing in its own target
# directory (WORK/NAME), one after the other, and prints each compile's wall
# time; then measures the loader's CPU per response of each candidate against
# the first one (the profile in Cargo.toml), side by side in pairs against one
# nginx on 127.0.0.1 (scripts/bench-loader.sh with REF_BIN).
#
# Candidates (PROFILES, default "cgu1-thin cgu16-thin cgu16-off"):
#   cgu1-thin   codegen-units = 1, lto = "thin"   (Cargo.toml's as of writing)
#   cgu16-thin  codegen-units = 16, lto = "thin"
#   cgu16-off   codegen-units = 16, lto = false   (Cargo's default release)
#   cgu1-fat    codegen-units = 1, lto = "fat"
# The rule (issue "fast where people wait"): keep the fastest-to-build profile
# whose loader CPU per response is within 2% of the first candidate's.
#
# A benchmark, not a test: it compiles fairground N times (minutes each on 2
# cores). Env: PROFILES, WORK (/tmp/fg-release-profiles), plus bench-loader's
# (CONNS "100", PAIRS 3, DURATION 10s, SERVERS nginx, LOCK).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILES=${PROFILES:-"cgu1-thin cgu16-thin cgu16-off"}
WORK=${WORK:-/tmp/fg-release-profiles}
export CONNS=${CONNS:-100} PAIRS=${PAIRS:-3} SERVERS=${SERVERS:-nginx}

settings() {
  case "$1" in
    cgu1-thin) echo "1 thin" ;;
    cgu16-thin) echo "16 thin" ;;
    cgu16-off) echo "16 false" ;;
    cgu1-fat) echo "1 fat" ;;
    *) echo "bench-release-profile: unknown profile '$1' (cgu1-thin, cgu16-thin, cgu16-off, cgu1-fat)" >&2; exit 2 ;;
  esac
}

mkdir -p "$WORK"
declare -A BUILT SECONDS_OF
for p in $PROFILES; do
  read -r cgu lto < <(settings "$p")
  dir="$WORK/$p"
  rm -rf "$dir"
  start=$(date +%s.%N)
  (cd "$ROOT" && CARGO_PROFILE_RELEASE_CODEGEN_UNITS="$cgu" CARGO_PROFILE_RELEASE_LTO="$lto" \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --quiet --target x86_64-unknown-linux-gnu --target-dir "$dir")
  end=$(date +%s.%N)
  SECONDS_OF[$p]=$(python3 -c "print(f'{$end - $start:.0f}')")
  BUILT[$p]="$dir/x86_64-unknown-linux-gnu/release/fairground"
  echo "compile $p (codegen-units $cgu, lto $lto): ${SECONDS_OF[$p]} s from nothing, binary $(stat -c %s "${BUILT[$p]}") bytes"
done

first=${PROFILES%% *}
for p in $PROFILES; do
  [[ "$p" == "$first" ]] && continue
  echo
  echo "== loader CPU per response: $p against $first (CPU ratio = $p / $first) =="
  FG_BIN="${BUILT[$p]}" REF_BIN="${BUILT[$first]}" REF_NAME="$first" NO_BUILD=1 \
    bash "$ROOT/scripts/bench-loader.sh" | grep -v "goals:" | sed "s/fairground/$p/g"
done
echo
echo "compile times (s): $(for p in $PROFILES; do printf '%s %s  ' "$p" "${SECONDS_OF[$p]}"; done)"

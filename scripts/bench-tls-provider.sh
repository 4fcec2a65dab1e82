#!/usr/bin/env bash
# bench-tls-provider.sh: which rustls crypto provider makes the loader
# faster over TLS on this machine, ring (what fairground ships) or aws-lc-rs?
#
# Builds a second static fairground from this checkout's HEAD in a scratch
# git worktree, with rustls and tokio-rustls switched to the aws_lc_rs
# feature and src/tls.rs's provider to aws_lc_rs::default_provider() (three
# lines; nothing is committed). Then runs scripts/bench-loader.sh against
# nginx (https, and h2 when PROTOCOLS says so) with each binary in turn,
# ROUNDS times, the order flipped every round. Each bench-loader run
# measures its binary side by side with wrk (https) or h2load (h2), so wrk
# and h2load are the yardstick both providers are held to on a shared,
# drifting machine. Printed: every run's ratio lines, then the median
# req/s ratio and CPU-per-response ratio against the yardstick per provider.
#
# A benchmark, not a test. Env: ROUNDS (2), PROTOCOLS ("https"), CONNS
# (100), DURATION (5s), PAIRS (3), RING_BIN (default: the static binary of
# `make static`), AWS_BIN (skip the build), LOCK as bench-loader.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-2}
export PROTOCOLS=${PROTOCOLS:-https} CONNS=${CONNS:-100} DURATION=${DURATION:-5s} PAIRS=${PAIRS:-3}
export SERVERS=nginx
RING_BIN=${RING_BIN:-$ROOT/target/x86_64-unknown-linux-gnu/release/fairground}
[ -x "$RING_BIN" ] || { echo "no fairground binary at $RING_BIN: make static" >&2; exit 1; }

if [ -z "${AWS_BIN:-}" ]; then
  TREE=$(mktemp -d /tmp/bench-tls-provider.XXXXXX)
  trap 'git -C "$ROOT" worktree remove --force "$TREE" 2>/dev/null || true' EXIT
  git worktree add -q --detach "$TREE" HEAD
  sed -i 's/features = \["ring", /features = ["aws_lc_rs", /' "$TREE/Cargo.toml"
  sed -i 's/rustls::crypto::ring::default_provider()/rustls::crypto::aws_lc_rs::default_provider()/' "$TREE/src/tls.rs"
  grep -q 'aws_lc_rs::default_provider' "$TREE/src/tls.rs" || { echo "src/tls.rs no longer names ring's provider: update this script" >&2; exit 1; }
  echo "building fairground with aws-lc-rs in $TREE (target /tmp/bench-tls-provider-target)" >&2
  (cd "$TREE" && CARGO_TARGET_DIR=/tmp/bench-tls-provider-target \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release -q --target x86_64-unknown-linux-gnu)
  AWS_BIN=/tmp/bench-tls-provider-target/x86_64-unknown-linux-gnu/release/fairground
fi

OUT=$(mktemp /tmp/bench-tls-provider-out.XXXXXX)
for r in $(seq 1 "$ROUNDS"); do
  order="ring aws-lc-rs"
  [ $((r % 2)) -eq 0 ] && order="aws-lc-rs ring"
  for p in $order; do
    bin=$RING_BIN
    [ "$p" = aws-lc-rs ] && bin=$AWS_BIN
    echo "== round $r: $p ($bin)"
    FG_BIN=$bin NO_BUILD=1 bash scripts/bench-loader.sh 2>&1 | sed "s/^/$p /" | tee -a "$OUT"
  done
done

echo
echo "provider   protocol  median req/s ratio  median CPU/response ratio (fairground / reference; $ROUNDS round(s) of $PAIRS pairs)"
python3 - "$OUT" <<'PY'
import re, statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) .*?(https|h2c|h2)\b.*?req/s ratio\s+([\d.]+).*?CPU ratio\s+([\d.]+)", line)
    if m:
        rows.setdefault((m[1], m[2]), []).append((float(m[3]), float(m[4])))
for (p, proto), v in sorted(rows.items()):
    print(f"{p:<10} {proto:<9} {st.median(x for x, _ in v):>18.2f}  {st.median(y for _, y in v):>25.2f}")
if not rows:
    print("no ratio lines found in bench-loader.sh's output (its format changed?)")
PY
rm -f "$OUT"

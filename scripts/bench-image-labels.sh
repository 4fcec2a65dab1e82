#!/usr/bin/env bash
# bench-image-labels.sh: what do an image's labels cost the classic builder?
#
# fairground labels every image it builds (fairground.run, .kind, .name,
# .inputs). Passed through the build API (`docker build --label`), the
# classic builder makes each label a step of its own, and on a daemon whose
# storage driver diffs layers by walking them (fuse-overlayfs, vfs) a step
# after a large base costs seconds. fairground now appends them to the
# Dockerfile as one LABEL instruction. This builds one framework's image
# (FRAMEWORK, default node-http, FROM its base image, which must exist: run
# `make bench PROFILE=quick` once) both ways, --no-cache, in alternating
# pairs, and prints each build's time and the ratio one LABEL / four labels.
#
# A benchmark, not a test. Env: FRAMEWORK, PAIRS (2), LOCK
# (/tmp/fairground-docker.lock; empty: no lock). Removes what it builds.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FRAMEWORK=${FRAMEWORK:-node-http}
PAIRS=${PAIRS:-2}
LOCK=${LOCK-/tmp/fairground-docker.lock}
DIR="$ROOT/frameworks/$FRAMEWORK"
[[ -f "$DIR/framework.yaml" ]] || { echo "bench-image-labels: no framework $FRAMEWORK" >&2; exit 2; }
base_name=$(sed -n 's/^base: *//p' "$DIR/framework.yaml")
BASE=$(docker images --format '{{.Repository}}:{{.Tag}}' "fairground/base-$base_name" | head -1)
[[ -n "$BASE" ]] || { echo "bench-image-labels: no fairground/base-$base_name image; run make bench PROFILE=quick first" >&2; exit 2; }

TMP=$(mktemp -d /tmp/fairground-bench-labels.XXXXXX)
TAG=fairground/bench-labels:$$
cleanup() { docker rmi -f "$TAG" >/dev/null 2>&1 || true; rm -rf "$TMP"; }
trap cleanup EXIT
cp -r "$DIR/." "$TMP/"
LABELS=(fairground.run=bench-labels fairground.kind=framework "fairground.name=$FRAMEWORK" fairground.inputs=0123456789abcdef)
{ cat "$DIR/Dockerfile"; printf '\nLABEL'; for l in "${LABELS[@]}"; do printf ' "%s"="%s"' "${l%%=*}" "${l#*=}"; done; echo; } > "$TMP/.one-label.Dockerfile"

if [[ -n "$LOCK" ]]; then exec 9>>"$LOCK"; flock 9; fi
# build WAY -> seconds
build() {
  local start end args=()
  if [[ "$1" == four ]]; then
    for l in "${LABELS[@]}"; do args+=(--label "$l"); done
  else
    args=(-f "$TMP/.one-label.Dockerfile")
  fi
  docker rmi -f "$TAG" >/dev/null 2>&1 || true
  start=$(date +%s.%N)
  timeout 600 docker build -q --no-cache --network none --build-arg "BASE=$BASE" -t "$TAG" "${args[@]}" "$TMP" >/dev/null 2>"$TMP/err" \
    || { cat "$TMP/err" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.1f}')"
}
echo "bench-image-labels: $FRAMEWORK FROM $BASE, $PAIRS pairs, storage driver $(docker info --format '{{.Driver}}')"
ratios=()
for pair in $(seq "$PAIRS"); do
  if (( pair % 2 )); then four=$(build four); one=$(build one); else one=$(build one); four=$(build four); fi
  r=$(python3 -c "print(f'{$one / $four:.3f}')")
  ratios+=("$r")
  echo "  pair $pair: four labels (API) ${four} s, one LABEL ${one} s, ratio $r"
done
python3 -c "import statistics,sys; print(f'median ratio one LABEL / four labels: {statistics.median(map(float, sys.argv[1:])):.3f}')" "${ratios[@]}"

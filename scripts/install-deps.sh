#!/usr/bin/env bash
# Install the host packages fairground needs, from Debian's archive, once.
#   scripts/install-deps.sh bench   what a run needs (`make bench`)
#   scripts/install-deps.sh         that and what the tests need (`make test`)
# A run needs:
#   mmdebstrap: builds base images from the Debian archive (no registry here)
#   docker.io, iptables: the engine, and the isolation rule of internal networks
# The tests also need:
#   wrk, nginx-light, nghttp2-client (h2load): the loader speed comparison
#     (scripts/bench-loader.sh) and independent clients in the tests
#   chromium: renders report.html headless in the browser test
#     (tests/report_html_browser.rs); about a minute to install, so a first
#     `make bench` does not wait for it
# Skips apt entirely when everything is already there.
set -euo pipefail
mode=${1:-test}
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v docker >/dev/null || need+=(docker.io)
command -v iptables >/dev/null || need+=(iptables)
if [[ $mode == bench ]]; then
  if ((${#need[@]})); then
    echo "installing host packages: ${need[*]}" >&2
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  exit 0
fi
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx-light)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v chromium >/dev/null || need+=(chromium)
command -v unshare >/dev/null || need+=(util-linux)  # the browser test's network namespace; nsenter
command -v ss >/dev/null || need+=(iproute2)  # tests/connections_10k.rs reads listen backlogs
command -v curl >/dev/null || need+=(curl)  # tests/serve.rs: an independent https, h2 and h2c client
if ((${#need[@]})); then
  echo "installing host packages: ${need[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt >/dev/null 2>&1 || true
# prometheus_client (PyPI): its OpenMetrics parser checks results.prom in
# tests/ci_outputs.rs. Installed for the python3 the tests will run.
python3 -c 'import prometheus_client' 2>/dev/null || {
  echo "installing python package: prometheus_client" >&2
  python3 -m pip install -q prometheus_client
}
# junitparser (PyPI): a real JUnit reader checks results.junit.xml in
# tests/ci_outputs.rs.
python3 -c 'import junitparser' 2>/dev/null || {
  echo "installing python package: junitparser" >&2
  python3 -m pip install -q junitparser
}

#!/bin/sh
# Writes the nginx config with worker_processes = FAIRGROUND_CPUS (not `auto`:
# nginx's auto counts the host's CPUs, not the container's --cpus quota).
set -eu
n="${FAIRGROUND_CPUS:-1}"
case "$n" in '' | *[!0-9]* | 0) n=1 ;; esac
sed "s/@WORKERS@/$n/" /etc/fairground/nginx.conf.in > /tmp/nginx.conf
exec nginx -e stderr -c /tmp/nginx.conf

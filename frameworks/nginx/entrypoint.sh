#!/bin/sh
# Writes the nginx config with worker_processes = FAIRGROUND_CPUS (not `auto`:
# nginx's auto counts the host's CPUs, not the container's --cpus quota), and
# sizes each worker's connections from the container's open-file limit.
set -eu
n="${FAIRGROUND_CPUS:-1}"
case "$n" in '' | *[!0-9]* | 0) n=1 ;; esac
# nginx docs, ngx_core_module worker_connections: "the actual number of
# simultaneous connections cannot exceed the current limit on the maximum
# number of open files, which can be changed by worker_rlimit_nofile". So:
# raise the soft limit to the hard one the container was given
# (worker_rlimit_nofile), and let a worker hold that many connections less
# a few descriptors for its listen socket and logs. A client connection is
# one descriptor (no upstreams here). nginx allocates a worker's connection
# structures at start (measured: idle memory 13.7 MB with 8,192, 18.9 MB with
# 19,936, about 440 bytes each), so a container left at Docker's default of
# 1,048,576 descriptors is held to 65,536 connections per worker.
nofile=$(ulimit -Hn)
case "$nofile" in '' | *[!0-9]*) nofile=1048576 ;; esac
conns=$((nofile - 64))
[ "$conns" -le 65536 ] || conns=65536
[ "$conns" -ge 512 ] || conns=512
sed -e "s/@WORKERS@/$n/" -e "s/@NOFILE@/$nofile/" -e "s/@CONNECTIONS@/$conns/g" \
  /etc/fairground/nginx.conf.in > /tmp/nginx.conf
exec nginx -e stderr -c /tmp/nginx.conf

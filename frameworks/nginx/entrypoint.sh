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
h2c_port="${FAIRGROUND_H2C_PORT:-8082}"
case "$h2c_port" in '' | *[!0-9]*) h2c_port=8082 ;; esac
# https and h2 only when fairground mounted a certificate (docs/contract.md,
# "Protocols"): the chain (server certificate, then the CA) and its PKCS#8
# key. TLS 1.2 and 1.3; no session cache (the client never resumes).
tls=""
if [ -n "${FAIRGROUND_TLS_CERT:-}" ]; then
  tls_port="${FAIRGROUND_TLS_PORT:-8443}"
  case "$tls_port" in '' | *[!0-9]*) tls_port=8443 ;; esac
  key="${FAIRGROUND_TLS_KEY:-/run/fairground/tls/server.key}"
  tls="        listen $tls_port ssl http2 reuseport backlog=$conns; ssl_certificate $FAIRGROUND_TLS_CERT; ssl_certificate_key $key; ssl_protocols TLSv1.2 TLSv1.3;"
fi
sed -e "s/@WORKERS@/$n/" -e "s/@NOFILE@/$nofile/" -e "s/@CONNECTIONS@/$conns/g" \
  -e "s/@H2C_PORT@/$h2c_port/" -e "s#^@TLS@\$#$tls#" \
  /etc/fairground/nginx.conf.in > /tmp/nginx.conf
exec nginx -e stderr -c /tmp/nginx.conf

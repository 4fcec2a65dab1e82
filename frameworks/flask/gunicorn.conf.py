"""Gunicorn settings: FAIRGROUND_CPUS worker processes, each a gthread worker.

gthread, not the default sync worker, because sync workers close the
connection after every response and the contract requires keep-alive.
"""
import os
import resource

bind = "0.0.0.0:8080"
workers = max(1, int(os.environ.get("FAIRGROUND_CPUS", "1") or 1))
worker_class = "gthread"
threads = 8
keepalive = 65
accesslog = None
loglevel = "warning"
worker_tmp_dir = "/tmp"

# The open-file limit the container was given (RLIMIT_NOFILE, soft = hard
# here): every kept-alive client connection is one descriptor of a worker.
_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
if _nofile == resource.RLIM_INFINITY:
    _nofile = 1 << 20

# Gunicorn settings, worker_connections: "The maximum number of simultaneous
# clients" (default 1000). gthread enforces it (gunicorn/workers/gthread.py,
# ThreadWorker.run accepts only while nr_conns < worker_connections, and
# kept-alive connections count), although 20.1's settings page still says
# only eventlet and gevent read it; the default held 1,056 of 10,000
# connections. Each worker may hold as many connections as it has
# descriptors, less a few for its listen socket, logs and heartbeat file;
# above the limit accept() would fail with EMFILE, which gthread does not
# survive.
worker_connections = max(threads + 1, _nofile - 64)

# Gunicorn settings, backlog: "The maximum number of pending connections"
# (default 2048). gthread accepts one connection per loop turn, so a burst of
# connects waits here; sized like worker_connections, capped by the kernel at
# net.core.somaxconn (the profile's server.sysctls).
backlog = worker_connections

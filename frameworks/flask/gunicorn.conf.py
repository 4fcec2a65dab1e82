"""Gunicorn settings: FAIRGROUND_CPUS worker processes, each a gthread worker.

gthread, not the default sync worker, because sync workers close the
connection after every response and the contract requires keep-alive.
"""
import os

bind = "0.0.0.0:8080"
workers = max(1, int(os.environ.get("FAIRGROUND_CPUS", "1") or 1))
worker_class = "gthread"
threads = 8
keepalive = 65
accesslog = None
loglevel = "warning"
worker_tmp_dir = "/tmp"

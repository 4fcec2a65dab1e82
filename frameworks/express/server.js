// The fairground contract on Express 4 (Debian node-express), one cluster
// worker per allotted CPU. Middleware chains are ordinary Express route
// middleware: app.get(path, mw1, ..., mwN, handler).
'use strict';
const cluster = require('node:cluster');
const fs = require('node:fs');
const express = require('express');

const CPUS = Math.max(1, parseInt(process.env.FAIRGROUND_CPUS || '1', 10) || 1);

// node:net server.listen(options), `backlog`: "the maximum length of the
// queue of pending connections" (default 511). With a burst of more connects
// than that, the rest wait in TCP retransmission before they are accepted.
// Use the kernel's own cap, net.core.somaxconn (the profile's
// server.sysctls), as Go's net package does; node:cluster hands the worker's
// backlog to the primary, which owns the listening socket.
function listenBacklog() {
  try {
    return parseInt(fs.readFileSync('/proc/sys/net/core/somaxconn', 'utf8'), 10) || 511;
  } catch (e) {
    return 511;
  }
}

if (cluster.isPrimary) {
  // node:cluster "How it works": by default (SCHED_RR) the primary accepts
  // every connection and hands it to a worker over IPC, one at a time: the next
  // handle is sent only after the worker's reply (Node 18
  // lib/internal/cluster/round_robin_handle.js, handoff). A worker busy
  // serving answers between turns of its event loop, so at 10,000 connections
  // the primary had accepted all of them within a second, yet the one
  // worker served only about 1,100 (those it had been handed) in the window.
  // SCHED_NONE, the cluster module's other documented policy, shares the
  // listening socket and each worker accepts its own connections; the docs
  // warn that the kernel may spread them unevenly over several workers.
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  for (let i = 0; i < CPUS; i++) cluster.fork();
  cluster.on('exit', (w, code) => {
    console.error(`worker ${w.process.pid} exited with ${code}`);
    process.exit(1);
  });
  console.log(`express listening on :8080 with ${CPUS} workers`);
} else {
  startWorker();
}

function validPerson(p) {
  if (p === null || typeof p !== 'object' || Array.isArray(p)) return false;
  const { name, age, email } = p;
  if (typeof name !== 'string') return false;
  const nameLen = [...name].length;
  return nameLen >= 1 && nameLen <= 64 &&
    Number.isInteger(age) && age >= 0 && age <= 150 &&
    typeof email === 'string' && Buffer.byteLength(email) >= 3 && Buffer.byteLength(email) <= 254 &&
    email.includes('@') && !email.startsWith('@') && !email.endsWith('@');
}

// Middleware layer i: reads x-test and sets x-mw-{i}.
function echoHeader(i) {
  const name = `x-mw-${i}`;
  return (req, res, next) => {
    res.set(name, req.get('x-test'));
    next();
  };
}

function hello(req, res) {
  res.type('text/plain').send('Hello, World!');
}

function startWorker() {
  const app = express();
  app.disable('x-powered-by');
  // strict: false because echo accepts any JSON value, not only objects.
  const json = express.json({ limit: '1mb', strict: false });

  app.get('/', hello);
  app.get('/json', (req, res) => res.json({ message: 'Hello, World!' }));
  app.get('/users/:id', (req, res) => res.json({ id: req.params.id, name: 'ada' }));
  app.post('/echo', json, (req, res) => res.json(req.body));
  app.post('/validate', json, (req, res) => {
    const p = req.body;
    if (!validPerson(p)) return res.status(422).type('text/plain').send('invalid person');
    res.json({ name: p.name, age: p.age, email: p.email });
  });
  // The database scenarios (db.js: node-pg, a pool per worker).
  const db = require('./db');
  const dbh = db.handlers(db.open(CPUS));
  for (const name of ['db', 'queries', 'fortunes', 'updates']) {
    app.get(`/${name}`, (req, res) =>
      dbh[name](req.url, (status, type, body) => res.status(status).set('Content-Type', type).send(body)));
  }
  for (let n = 0; n <= 10; n++) {
    const layers = [];
    for (let i = 1; i <= n; i++) layers.push(echoHeader(i));
    app.get(`/mw/${n}`, ...layers, hello);
  }
  // Express 4 app.listen([port[, host[, backlog]]]) is http.Server#listen.
  app.listen(8080, '0.0.0.0', listenBacklog());
}

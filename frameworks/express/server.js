// The fairground contract on Express 4 (Debian node-express), one cluster
// worker per allotted CPU. Middleware chains are ordinary Express route
// middleware: app.get(path, mw1, ..., mwN, handler).
'use strict';
const cluster = require('node:cluster');
const express = require('express');

const CPUS = Math.max(1, parseInt(process.env.FAIRGROUND_CPUS || '1', 10) || 1);

if (cluster.isPrimary) {
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
  for (let n = 0; n <= 10; n++) {
    const layers = [];
    for (let i = 1; i <= n; i++) layers.push(echoHeader(i));
    app.get(`/mw/${n}`, ...layers, hello);
  }
  app.listen(8080, '0.0.0.0');
}

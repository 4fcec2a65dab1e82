// The fairground contract on Node's own node:http, one cluster worker per
// allotted CPU. Middleware is the plain-Node idiom: handler wrappers
// (handler) => (req, res) => ..., composed per route.
'use strict';
const cluster = require('node:cluster');
const http = require('node:http');

const CPUS = Math.max(1, parseInt(process.env.FAIRGROUND_CPUS || '1', 10) || 1);
const BODY_LIMIT = 1 << 20; // the contract sends at most 64 KiB

function send(res, status, type, body) {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const sendJson = (res, value) => send(res, 200, 'application/json', JSON.stringify(value));
const notFound = (res) => send(res, 404, 'text/plain', 'Not Found');
const hello = (req, res) => send(res, 200, 'text/plain', 'Hello, World!');

function readJson(req, res, then) {
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > BODY_LIMIT) { send(res, 413, 'text/plain', 'body too large'); req.destroy(); return; }
    chunks.push(c);
  });
  req.on('end', () => {
    if (size > BODY_LIMIT) return;
    let value;
    try { value = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch (e) {
      return send(res, 400, 'text/plain', 'invalid JSON');
    }
    then(value);
  });
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

// Middleware layer i: reads x-test, sets x-mw-{i}, calls the next handler.
const echoHeader = (i) => {
  const name = `x-mw-${i}`;
  return (next) => (req, res) => {
    res.setHeader(name, req.headers['x-test'] || '');
    next(req, res);
  };
};

// chain(n) wraps hello in n layers, layer 1 outermost.
function chain(n) {
  let h = hello;
  for (let i = n; i >= 1; i--) h = echoHeader(i)(h);
  return h;
}

function startWorker() {
  const chains = new Map();
  for (let n = 0; n <= 10; n++) chains.set(`/mw/${n}`, chain(n));

  const server = http.createServer((req, res) => {
    const q = req.url.indexOf('?');
    const path = q === -1 ? req.url : req.url.slice(0, q);
    if (req.method === 'GET') {
      if (path === '/') return hello(req, res);
      if (path === '/json') return sendJson(res, { message: 'Hello, World!' });
      if (path.startsWith('/users/')) {
        const id = path.slice(7);
        if (id && !id.includes('/')) return sendJson(res, { id, name: 'ada' });
        return notFound(res);
      }
      const mw = chains.get(path);
      if (mw) return mw(req, res);
    } else if (req.method === 'POST') {
      if (path === '/echo') return readJson(req, res, (v) => sendJson(res, v));
      if (path === '/validate') {
        return readJson(req, res, (p) => {
          if (!validPerson(p)) return send(res, 422, 'text/plain', 'invalid person');
          sendJson(res, { name: p.name, age: p.age, email: p.email });
        });
      }
    }
    notFound(res);
  });
  server.keepAliveTimeout = 65000;
  server.listen(8080, '0.0.0.0');
}

if (cluster.isPrimary) {
  for (let i = 0; i < CPUS; i++) cluster.fork();
  cluster.on('exit', (w, code) => {
    console.error(`worker ${w.process.pid} exited with ${code}`);
    process.exit(1);
  });
  console.log(`node:http listening on :8080 with ${CPUS} workers`);
} else {
  startWorker();
}

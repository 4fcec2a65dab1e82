// The fairground contract on Node's own node:http, one cluster worker per
// allotted CPU. Middleware is the plain-Node idiom: handler wrappers
// (handler) => (req, res) => ..., composed per route. The one request handler
// serves HTTP/1.1 on 8080 (node:http), HTTP/2 and HTTP/1.1 over TLS on 8443
// (node:http2 createSecureServer with allowHTTP1: ALPN h2 and http/1.1) and
// HTTP/2 with prior knowledge on 8082 (node:http2 createServer), through
// node:http2's compatibility API (the same req/res methods as node:http).
// WebSocket (ws-echo): GET /ws upgraded by the `ws` package (Debian node-ws)
// on the HTTP/1.1 listeners, 8080 and the TLS one (wss://).
'use strict';
const cluster = require('node:cluster');
const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');
const { WebSocketServer } = require('ws');

const CPUS = Math.max(1, parseInt(process.env.FAIRGROUND_CPUS || '1', 10) || 1);
const BODY_LIMIT = 1 << 20; // the contract sends at most 64 KiB

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

// ws-echo: one WebSocketServer per worker in noServer mode, the `ws` README's
// way to share it among several HTTP servers; each server's 'upgrade' event
// hands it GET /ws. Defaults kept (maxPayload 100 MiB, UTF-8 validated) and
// permessage-deflate off, as is WebSocketServer's default, but said here.
function wsUpgrade() {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  wss.on('connection', (ws) => {
    // Every data message echoed as it came: text as text, binary as binary.
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
    ws.on('error', () => {});
  });
  return (req, socket, head) => {
    const q = req.url.indexOf('?');
    const path = q === -1 ? req.url : req.url.slice(0, q);
    if (path === '/ws' && req.method === 'GET') {
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
      return;
    }
    // An upgrade to anything else: refused, as `ws` refuses a bad handshake.
    socket.on('error', () => {});
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  };
}

function startWorker() {
  const chains = new Map();
  for (let n = 0; n <= 10; n++) chains.set(`/mw/${n}`, chain(n));
  // The database scenarios (db.js: node-pg, a pool per worker).
  const db = require('./db');
  const dbh = db.handlers(db.open(CPUS));
  const dbRoutes = new Map(['db', 'queries', 'fortunes', 'updates'].map((n) => [`/${n}`, dbh[n]]));

  const handler = (req, res) => {
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
      const dbRoute = dbRoutes.get(path);
      if (dbRoute) return dbRoute(req.url, (status, type, body) => send(res, status, type, body));
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
  };
  const backlog = listenBacklog();
  const upgrade = wsUpgrade();
  const server = http.createServer(handler);
  server.keepAliveTimeout = 65000;
  server.on('upgrade', upgrade);
  server.listen({ port: 8080, host: '0.0.0.0', backlog });
  // h2c: HTTP/2 with prior knowledge on plain TCP (no HTTP/1.1 on this port).
  const h2c = http2.createServer(handler);
  h2c.listen({ port: portEnv('FAIRGROUND_H2C_PORT', 8082), host: '0.0.0.0', backlog });
  // https and h2 on one TLS listener, only when fairground mounted a
  // certificate: the chain (server certificate, then the CA) and the PKCS#8
  // key. allowHTTP1 makes ALPN offer http/1.1 next to h2 and hands those
  // connections to the same handler as node:http request/response objects.
  if (process.env.FAIRGROUND_TLS_CERT) {
    const tls = http2.createSecureServer({
      cert: fs.readFileSync(process.env.FAIRGROUND_TLS_CERT),
      key: fs.readFileSync(process.env.FAIRGROUND_TLS_KEY || '/run/fairground/tls/server.key'),
      allowHTTP1: true,
      minVersion: 'TLSv1.2',
    }, handler);
    // Its HTTP/1.1 side (allowHTTP1) emits 'upgrade' as node:http does: wss://.
    tls.on('upgrade', upgrade);
    tls.listen({ port: portEnv('FAIRGROUND_TLS_PORT', 8443), host: '0.0.0.0', backlog });
  }
}

function portEnv(name, def) {
  const p = parseInt(process.env[name] || '', 10);
  return p > 0 ? p : def;
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
  console.log(`node:http listening on :8080 with ${CPUS} workers`);
} else {
  startWorker();
}

// The database scenarios (db, queries, fortunes, updates) on node-pg
// (Debian node-pg, `pg` 8): one pg.Pool per worker holding its share of
// FAIRGROUND_DB_POOL, named prepared statements, one SELECT per row and
// one UPDATE per row (not batched), opened only when FAIRGROUND_DB_HOST is
// set. Shared verbatim by node-http and express.
'use strict';
const { Pool } = require('pg');

const ADDED = 'Additional fortune added at request time.';

function poolSize(workers) {
  const total = parseInt(process.env.FAIRGROUND_DB_POOL || '8', 10) || 8;
  return Math.max(1, Math.floor(total / Math.max(1, workers)));
}

function open(workers) {
  if (!process.env.FAIRGROUND_DB_HOST) return null;
  const pool = new Pool({
    host: process.env.FAIRGROUND_DB_HOST,
    port: parseInt(process.env.FAIRGROUND_DB_PORT || '5432', 10),
    database: process.env.FAIRGROUND_DB_NAME || 'hello_world',
    user: process.env.FAIRGROUND_DB_USER,
    password: process.env.FAIRGROUND_DB_PASSWORD,
    max: poolSize(workers),
  });
  pool.on('error', (e) => console.error(`ERROR database at ${process.env.FAIRGROUND_DB_HOST}: ${e.message}`));
  return pool;
}

const randomId = () => 1 + Math.floor(Math.random() * 10000);

// TechEmpower's rule: missing, empty, not a number or below 1 is 1; above 500 is 500.
function count(url) {
  const q = url.indexOf('?');
  const params = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  const n = parseInt(params.get('queries') || '', 10);
  if (!(n >= 1)) return 1;
  return Math.min(n, 500);
}

const world = (pool, id) =>
  pool.query({ name: 'world', text: 'SELECT id, randomnumber FROM world WHERE id = $1', values: [id] })
    .then((r) => ({ id: r.rows[0].id, randomNumber: r.rows[0].randomnumber }));

const escapes = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escape = (s) => s.replace(/[&<>"']/g, (c) => escapes[c]);

function fortunesPage(rows) {
  let page = '<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>';
  for (const r of rows) page += `<tr><td>${r.id}</td><td>${escape(r.message)}</td></tr>`;
  return page + '</table></body></html>';
}

// The four handlers: each answers (status, content type, body) through `send`.
function handlers(pool) {
  const fail = (send) => (e) => send(503, 'text/plain', `database error: ${e.message}`);
  const noDb = (send) => send(503, 'text/plain', 'no database configured');
  return {
    db(url, send) {
      if (!pool) return noDb(send);
      world(pool, randomId()).then((row) => send(200, 'application/json', JSON.stringify(row)), fail(send));
    },
    queries(url, send) {
      if (!pool) return noDb(send);
      const reads = [];
      for (let i = count(url); i > 0; i--) reads.push(world(pool, randomId()));
      Promise.all(reads).then((rows) => send(200, 'application/json', JSON.stringify(rows)), fail(send));
    },
    fortunes(url, send) {
      if (!pool) return noDb(send);
      pool.query({ name: 'fortunes', text: 'SELECT id, message FROM fortune' }).then((r) => {
        const rows = r.rows.concat([{ id: 0, message: ADDED }]);
        rows.sort((a, b) => (a.message < b.message ? -1 : a.message > b.message ? 1 : 0));
        send(200, 'text/html; charset=utf-8', fortunesPage(rows));
      }, fail(send));
    },
    updates(url, send) {
      if (!pool) return noDb(send);
      const reads = [];
      for (let i = count(url); i > 0; i--) reads.push(world(pool, randomId()));
      Promise.all(reads).then((rows) => {
        const writes = rows.map((row) => {
          row.randomNumber = randomId();
          return pool.query({
            name: 'update',
            text: 'UPDATE world SET randomnumber = $2 WHERE id = $1',
            values: [row.id, row.randomNumber],
          });
        });
        return Promise.all(writes).then(() => send(200, 'application/json', JSON.stringify(rows)));
      }).catch(fail(send));
    },
  };
}

module.exports = { open, handlers };

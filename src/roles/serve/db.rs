//! The reference server's database scenarios: one tokio-postgres
//! connection per server thread (each thread runs its own current-thread
//! runtime, so the connection never crosses threads; requests of that
//! thread pipeline on it), opened on the first database request, with its
//! statements prepared once.
//!
//! What it asks is known exactly, which is what the known-answer tests
//! count in `pg_stat_statements` and in the tables' own row counters: `db`
//! one SELECT (one row fetched); `queries-N` N SELECTs (N rows); `fortunes`
//! one SELECT (every row of the table); `updates-N` N SELECTs and N
//! single-row UPDATEs (N rows read, N written).
//!
//! [`DbDefect`] turns it into a liar that breaks exactly one database rule
//! and passes every other, for the tests that prove fairground catches
//! each (tests/database_docker.rs).

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use tokio_postgres::{Client, Statement};

use crate::contract::db;

/// A known defect of the database answers, for tests that prove
/// verification catches it (`fairground serve --db-defect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DbDefect {
    /// `db` answers from a copy of the whole table read once (a cache:
    /// right values, random rows, no queries).
    Cache,
    /// `db` and `queries` return numbers they never read (after reading).
    FakeValues,
    /// `updates` never write what they return.
    NoPersist,
    /// `fortunes` shows messages unescaped.
    RawFortunes,
    /// `db` and `queries` read each id from PostgreSQL the first time it
    /// is asked and from memory afterwards (right values until the table
    /// changes; fewer rows fetched than answered once an id repeats).
    ByIdCache,
    /// `db` and `queries` answer from a copy of the table read at the first
    /// request, and send one statement that names `world` but reads no row
    /// (`SELECT 1 FROM world LIMIT 0`) per row asked: statement counts by
    /// text look honest, the table's row counters do not.
    CheapStatement,
    /// `fortunes` is a page built from the published rows at start-up plus
    /// `SELECT 1 -- fortune` per request: right until the table changes.
    FakeFortunes,
    /// `db` and `queries` are honest for the first
    /// `FAIRGROUND_SERVE_DB_CACHE_AFTER` requests (10,000 unless set), then
    /// behave as [`DbDefect::CheapStatement`]: more requests than a
    /// verification sends, so only the gates under load can see it.
    LateCache,
    /// `updates` read and write as asked inside a transaction that is
    /// rolled back: every statement counted, nothing kept.
    RolledBack,
    /// `updates` skip the reads: each row is written with a new number and
    /// returned, never read first. The writes persist and look up one row
    /// each, so only the count of rows read (a read and a write's lookup
    /// per row) sees the missing reads.
    WriteOnly,
}

/// Requests [`DbDefect::LateCache`] answers honestly when
/// `FAIRGROUND_SERVE_DB_CACHE_AFTER` is not set.
pub const LATE_CACHE_AFTER: u64 = 10_000;

/// `db` and `queries` requests answered so far (for [`DbDefect::LateCache`]).
static ASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn late_cache_on() -> bool {
    let after = std::env::var("FAIRGROUND_SERVE_DB_CACHE_AFTER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LATE_CACHE_AFTER);
    ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= after
}

static DEFECT: std::sync::OnceLock<DbDefect> = std::sync::OnceLock::new();

/// Answer with `defect` from now on (once per process).
pub fn set_db_defect(defect: DbDefect) {
    let _ = DEFECT.set(defect);
}

fn defect(d: DbDefect) -> bool {
    DEFECT.get() == Some(&d)
}

thread_local! {
    static CACHED: RefCell<Option<std::collections::HashMap<u32, u32>>> = const { RefCell::new(None) };
    /// [`DbDefect::ByIdCache`]'s ids read so far.
    static BY_ID: RefCell<std::collections::HashMap<u32, u32>> = RefCell::new(std::collections::HashMap::new());
}

/// This thread's copy of the whole `world` table, read on first use.
async fn whole_table(conn: &Conn) -> Result<(), String> {
    if CACHED.with(|c| c.borrow().is_none()) {
        let all = conn
            .client
            .query("SELECT id, randomnumber FROM world", &[])
            .await
            .map_err(|e| e.to_string())?;
        let table = all
            .iter()
            .map(|r| (r.get::<_, i32>(0) as u32, r.get::<_, i32>(1) as u32))
            .collect();
        CACHED.with(|c| *c.borrow_mut() = Some(table));
    }
    Ok(())
}

/// `ids` from the whole-table copy, with one statement per id that names
/// `world` and reads no row.
async fn from_copy_with_cheap_statements(
    conn: &Conn,
    ids: &[i32],
) -> Result<Vec<(u32, u32)>, String> {
    whole_table(conn).await?;
    let cheap = ids
        .iter()
        .map(|_| async { conn.client.query("SELECT 1 FROM world LIMIT 0", &[]).await });
    for done in futures_util::future::join_all(cheap).await {
        done.map_err(|e| e.to_string())?;
    }
    Ok(ids
        .iter()
        .map(|&id| {
            let id = id as u32;
            let n = CACHED.with(|c| c.borrow().as_ref().and_then(|t| t.get(&id).copied()));
            (id, n.unwrap_or(1))
        })
        .collect())
}

/// `ids` read from PostgreSQL the first time each is asked, from memory
/// afterwards.
async fn by_id_cached(conn: &Conn, ids: &[i32]) -> Result<Vec<(u32, u32)>, String> {
    let missing: Vec<i32> = ids
        .iter()
        .copied()
        .filter(|id| BY_ID.with(|m| !m.borrow().contains_key(&(*id as u32))))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for (id, n) in read(conn, &missing).await? {
        BY_ID.with(|m| m.borrow_mut().insert(id, n));
    }
    Ok(ids
        .iter()
        .map(|&id| {
            let id = id as u32;
            (
                id,
                BY_ID.with(|m| m.borrow().get(&id).copied().unwrap_or(1)),
            )
        })
        .collect())
}

/// The rows of `ids`: read one SELECT per id, or as the defect in force
/// lies about them.
async fn world_rows(conn: &Conn, ids: &[i32]) -> Result<Vec<(u32, u32)>, String> {
    if defect(DbDefect::ByIdCache) {
        return by_id_cached(conn, ids).await;
    }
    if defect(DbDefect::CheapStatement) || (defect(DbDefect::LateCache) && late_cache_on()) {
        return from_copy_with_cheap_statements(conn, ids).await;
    }
    Ok(faked(read(conn, ids).await?))
}

/// A request's database work.
#[derive(Debug, Clone, Copy)]
pub enum Ask {
    Db,
    Queries,
    Fortunes,
    Updates,
}

/// This thread's connection and statements.
struct Conn {
    client: Client,
    world: Statement,
    fortunes: Statement,
    update: Statement,
}

thread_local! {
    static CONN: RefCell<Option<Arc<Conn>>> = const { RefCell::new(None) };
}

/// The connection string from the environment fairground sets.
fn config() -> Result<String, String> {
    let var = |k: &str| std::env::var(k).map_err(|_| format!("{k} is not set: no database"));
    Ok(format!(
        "host={} port={} dbname={} user={} password={}",
        var(db::DB_HOST_ENV)?,
        std::env::var(db::DB_PORT_ENV).unwrap_or_else(|_| db::DB_PORT.to_string()),
        std::env::var(db::DB_NAME_ENV).unwrap_or_else(|_| db::DB_NAME.to_string()),
        std::env::var(db::DB_USER_ENV).unwrap_or_else(|_| db::DB_USER.to_string()),
        std::env::var(db::DB_PASSWORD_ENV).unwrap_or_else(|_| db::DB_PASSWORD.to_string()),
    ))
}

async fn connect() -> Result<Arc<Conn>, String> {
    if let Some(c) = CONN.with(|c| c.borrow().clone()) {
        return Ok(c);
    }
    let (client, connection) = tokio_postgres::connect(&config()?, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to the database: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("fairground serve: database connection ended: {e}");
            CONN.with(|c| c.borrow_mut().take());
        }
    });
    let prepare = |sql: &'static str| {
        let client = &client;
        async move {
            client
                .prepare(sql)
                .await
                .map_err(|e| format!("cannot prepare `{sql}`: {e}"))
        }
    };
    let conn = Arc::new(Conn {
        world: prepare("SELECT id, randomnumber FROM world WHERE id = $1").await?,
        fortunes: prepare("SELECT id, message FROM fortune").await?,
        update: prepare("UPDATE world SET randomnumber = $2 WHERE id = $1").await?,
        client,
    });
    // Two requests may have connected at once: keep the first.
    Ok(CONN.with(|c| c.borrow_mut().get_or_insert(conn).clone()))
}

/// Answer `ask` (its query string `query`).
pub async fn answer(ask: Ask, query: Option<&str>) -> Response<Full<Bytes>> {
    match work(ask, query).await {
        Ok((content_type, body)) => {
            let mut resp = Response::new(Full::new(Bytes::from(body)));
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            resp
        }
        Err(e) => super::text(StatusCode::SERVICE_UNAVAILABLE, &e),
    }
}

async fn work(ask: Ask, query: Option<&str>) -> Result<(&'static str, String), String> {
    let conn = connect().await?;
    let count = || db::count_in_path(&format!("/?{}", query.unwrap_or("")));
    let ids = |n: u16| -> Vec<i32> {
        let mut rng = rand::rng();
        (0..n)
            .map(|_| db::random_world_id(&mut rng) as i32)
            .collect()
    };
    match ask {
        Ask::Db => {
            if defect(DbDefect::Cache) {
                whole_table(&conn).await?;
                let id = ids(1)[0] as u32;
                let n = CACHED.with(|c| c.borrow().as_ref().and_then(|t| t.get(&id).copied()));
                return Ok((
                    super::APPLICATION_JSON,
                    db::world_json(&[(id, n.unwrap_or(0))], true),
                ));
            }
            let rows = world_rows(&conn, &ids(1)).await?;
            Ok((super::APPLICATION_JSON, db::world_json(&rows, true)))
        }
        Ask::Queries => {
            let rows = world_rows(&conn, &ids(count())).await?;
            Ok((super::APPLICATION_JSON, db::world_json(&rows, false)))
        }
        Ask::Fortunes => {
            if defect(DbDefect::FakeFortunes) {
                conn.client
                    .query("SELECT 1 -- fortune", &[])
                    .await
                    .map_err(|e| e.to_string())?;
                let mut rows: Vec<(i32, String)> = db::FORTUNES
                    .iter()
                    .map(|(id, m)| (*id, m.to_string()))
                    .collect();
                rows.push((0, db::ADDED_FORTUNE.to_string()));
                rows.sort_by(|a, b| a.1.cmp(&b.1));
                return Ok((db::FORTUNES_CONTENT_TYPE, db::fortunes_page(&rows)));
            }
            let mut rows: Vec<(i32, String)> = conn
                .client
                .query(&conn.fortunes, &[])
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            rows.push((0, db::ADDED_FORTUNE.to_string()));
            rows.sort_by(|a, b| a.1.cmp(&b.1));
            let page = db::fortunes_page(&rows);
            if defect(DbDefect::RawFortunes) {
                let raw = page.replace("&lt;", "<").replace("&gt;", ">");
                return Ok((db::FORTUNES_CONTENT_TYPE, raw));
            }
            Ok((db::FORTUNES_CONTENT_TYPE, page))
        }
        Ask::Updates => {
            let mut rows = if defect(DbDefect::WriteOnly) {
                ids(count()).into_iter().map(|id| (id as u32, 0)).collect()
            } else {
                read(&conn, &ids(count())).await?
            };
            {
                let mut rng = rand::rng();
                for row in &mut rows {
                    row.1 = db::random_number(&mut rng);
                }
            }
            if defect(DbDefect::NoPersist) {
                return Ok((super::APPLICATION_JSON, db::world_json(&rows, false)));
            }
            if defect(DbDefect::RolledBack) {
                // One simple-query message: no other request's statement
                // on this shared connection can fall inside the transaction.
                let mut batch = String::from("BEGIN;");
                for (id, n) in &rows {
                    batch.push_str(&format!(
                        "UPDATE world SET randomnumber = {n} WHERE id = {id};"
                    ));
                }
                batch.push_str("ROLLBACK;");
                conn.client
                    .batch_execute(&batch)
                    .await
                    .map_err(|e| e.to_string())?;
                return Ok((super::APPLICATION_JSON, db::world_json(&rows, false)));
            }
            let writes = rows.iter().map(|(id, n)| {
                let (id, n) = (*id as i32, *n as i32);
                let conn = &conn;
                async move { conn.client.execute(&conn.update, &[&id, &n]).await }
            });
            for done in futures_util::future::join_all(writes).await {
                done.map_err(|e| e.to_string())?;
            }
            Ok((super::APPLICATION_JSON, db::world_json(&rows, false)))
        }
    }
}

/// `rows` with numbers never read, under [`DbDefect::FakeValues`].
fn faked(mut rows: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    if defect(DbDefect::FakeValues) {
        let mut rng = rand::rng();
        for r in &mut rows {
            r.1 = db::random_number(&mut rng);
        }
    }
    rows
}

/// One SELECT per id, pipelined on the connection.
async fn read(conn: &Conn, ids: &[i32]) -> Result<Vec<(u32, u32)>, String> {
    let reads = ids
        .iter()
        .map(|id| async move { conn.client.query_one(&conn.world, &[id]).await });
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .map(|r| {
            let row = r.map_err(|e| e.to_string())?;
            Ok((row.get::<_, i32>(0) as u32, row.get::<_, i32>(1) as u32))
        })
        .collect()
}

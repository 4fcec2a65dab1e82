//! The database scenarios (db, queries, fortunes, updates) the actix way:
//! every worker (one single-threaded runtime each) owns its own
//! deadpool-postgres pool over tokio-postgres, handed to handlers as
//! `web::Data`, so a request never leaves its worker's thread. The
//! FAIRGROUND_DB_POOL connections are divided among the workers (at least
//! one each). Statements are prepared once per connection
//! (`prepare_cached`); one SELECT per row and one UPDATE per row, pipelined
//! on the request's connection.

use std::cell::OnceCell;

use actix_web::{web, HttpResponse};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde::{Deserialize, Serialize};

const READ: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const WRITE: &str = "UPDATE world SET randomnumber = $2 WHERE id = $1";
const FORTUNES: &str = "SELECT id, message FROM fortune";
const ADDED: &str = "Additional fortune added at request time.";

#[derive(Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

#[derive(Deserialize)]
pub struct Count {
    queries: Option<String>,
}

impl Count {
    /// TechEmpower's rule: missing, empty, not a number or below 1 is 1;
    /// above 500 is 500.
    fn get(&self) -> usize {
        let n = self
            .queries
            .as_deref()
            .and_then(|q| q.trim().parse::<i64>().ok())
            .unwrap_or(1);
        n.clamp(1, 500) as usize
    }
}

/// Where the database is and how many connections each worker pools: read
/// once in `main`, when FAIRGROUND_DB_HOST is set.
#[derive(Clone)]
pub struct Settings {
    config: tokio_postgres::Config,
    host: String,
    per_worker: usize,
}

impl Settings {
    pub fn from_env(workers: usize) -> Option<Settings> {
        let host = std::env::var("FAIRGROUND_DB_HOST").ok()?;
        let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
        let mut config = tokio_postgres::Config::new();
        config
            .host(&host)
            .port(var("FAIRGROUND_DB_PORT", "5432").parse().unwrap_or(5432))
            .dbname(var("FAIRGROUND_DB_NAME", "hello_world"))
            .user(var("FAIRGROUND_DB_USER", "benchmarkdbuser"))
            .password(var("FAIRGROUND_DB_PASSWORD", "benchmarkdbpass"))
            .connect_timeout(std::time::Duration::from_secs(5));
        let total: usize = var("FAIRGROUND_DB_POOL", "8").parse().unwrap_or(8);
        let per_worker = (total / workers.max(1)).max(1);
        eprintln!("actix-web database at {host}: {per_worker} connections per worker");
        Some(Settings {
            config,
            host,
            per_worker,
        })
    }
}

/// The worker's pool (None without a database): made on the first call on
/// this worker's thread and shared by every listener's App there.
pub fn worker_pool(settings: &Option<Settings>) -> Option<Pool> {
    thread_local! {
        static POOL: OnceCell<Option<Pool>> = const { OnceCell::new() };
    }
    let settings = settings.as_ref()?;
    POOL.with(|cell| cell.get_or_init(|| make_pool(settings)).clone())
}

fn make_pool(s: &Settings) -> Option<Pool> {
    let manager = Manager::from_config(
        s.config.clone(),
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    match Pool::builder(manager).max_size(s.per_worker).build() {
        Ok(pool) => {
            // deadpool connects lazily; one connection now says early
            // whether the database answers (the other scenarios are served
            // either way).
            let probe = pool.clone();
            let host = s.host.clone();
            actix_web::rt::spawn(async move {
                if let Err(e) = probe.get().await {
                    eprintln!("ERROR cannot connect to the database at {host}: {e}");
                }
            });
            Some(pool)
        }
        Err(e) => {
            eprintln!("ERROR database pool for {}: {e}", s.host);
            None
        }
    }
}

/// The four routes, answering 503 without a database.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/db", web::get().to(db))
        .route("/queries", web::get().to(queries))
        .route("/fortunes", web::get().to(fortunes))
        .route("/updates", web::get().to(updates));
}

type DbPool = web::Data<Option<Pool>>;

fn unavailable(e: impl std::fmt::Display) -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .content_type("text/plain")
        .body(format!("database: {e}"))
}

fn random_id() -> i32 {
    fastrand::i32(1..=10_000)
}

async fn client(pool: &DbPool) -> Result<deadpool_postgres::Client, HttpResponse> {
    let pool = pool
        .as_ref()
        .as_ref()
        .ok_or_else(|| unavailable("none configured"))?;
    pool.get().await.map_err(unavailable)
}

/// `n` random rows, one prepared SELECT each, pipelined on one connection.
async fn read(client: &deadpool_postgres::Client, n: usize) -> Result<Vec<World>, HttpResponse> {
    let stmt = client.prepare_cached(READ).await.map_err(unavailable)?;
    let stmt = &stmt;
    let reads = (0..n).map(|_| async move { client.query_one(stmt, &[&random_id()]).await });
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .map(|r| {
            let row = r.map_err(unavailable)?;
            Ok(World {
                id: row.get(0),
                random_number: row.get(1),
            })
        })
        .collect()
}

async fn db(pool: DbPool) -> HttpResponse {
    let rows = match client(&pool).await {
        Ok(c) => read(&c, 1).await,
        Err(r) => return r,
    };
    match rows {
        Ok(rows) => HttpResponse::Ok().json(&rows[0]),
        Err(r) => r,
    }
}

async fn queries(pool: DbPool, q: web::Query<Count>) -> HttpResponse {
    let rows = match client(&pool).await {
        Ok(c) => read(&c, q.get()).await,
        Err(r) => return r,
    };
    match rows {
        Ok(rows) => HttpResponse::Ok().json(rows),
        Err(r) => r,
    }
}

async fn fortunes(pool: DbPool) -> HttpResponse {
    let c = match client(&pool).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let stmt = match c.prepare_cached(FORTUNES).await {
        Ok(s) => s,
        Err(e) => return unavailable(e),
    };
    let mut rows: Vec<(i32, String)> = match c.query(&stmt, &[]).await {
        Ok(rows) => rows.iter().map(|r| (r.get(0), r.get(1))).collect(),
        Err(e) => return unavailable(e),
    };
    drop(c);
    rows.push((0, ADDED.to_string()));
    rows.sort_by(|a, b| a.1.cmp(&b.1));
    let mut page = String::from(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>",
    );
    for (id, message) in &rows {
        page.push_str(&format!(
            "<tr><td>{id}</td><td>{}</td></tr>",
            escape(message)
        ));
    }
    page.push_str("</table></body></html>");
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(page)
}

async fn updates(pool: DbPool, q: web::Query<Count>) -> HttpResponse {
    let c = match client(&pool).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let mut rows = match read(&c, q.get()).await {
        Ok(rows) => rows,
        Err(r) => return r,
    };
    let stmt = match c.prepare_cached(WRITE).await {
        Ok(s) => s,
        Err(e) => return unavailable(e),
    };
    for row in &mut rows {
        row.random_number = random_id();
    }
    let (c, stmt) = (&c, &stmt);
    let writes = rows
        .iter()
        .map(|row| async move { c.execute(stmt, &[&row.id, &row.random_number]).await });
    for done in futures_util::future::join_all(writes).await {
        if let Err(e) = done {
            return unavailable(e);
        }
    }
    HttpResponse::Ok().json(rows)
}

/// HTML text escaping of `& < > " '`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

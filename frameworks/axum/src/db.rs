//! The database scenarios (db, queries, fortunes, updates) the way axum's
//! own tokio-postgres example serves a database: a pool in the router's
//! state (deadpool-postgres over tokio-postgres, FAIRGROUND_DB_POOL
//! connections), statements prepared once per connection
//! (`prepare_cached`), one SELECT per row, one UPDATE per row pipelined on
//! the request's connection.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde::{Deserialize, Serialize};

const READ: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const WRITE: &str = "UPDATE world SET randomnumber = $2 WHERE id = $1";
const ADDED: &str = "Additional fortune added at request time.";

#[derive(Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

#[derive(Deserialize)]
struct Count {
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

/// The pool, when fairground gave the server a database.
pub fn pool() -> Option<Pool> {
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
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let size = var("FAIRGROUND_DB_POOL", "8").parse().unwrap_or(8).max(1);
    let pool = match Pool::builder(manager).max_size(size).build() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ERROR database pool for {host}: {e}");
            return None;
        }
    };
    // deadpool connects lazily; one connection now says early whether the
    // database answers (the other scenarios are served either way).
    let probe = pool.clone();
    tokio::spawn(async move {
        match probe.get().await {
            Ok(_) => eprintln!("axum database at {host} ready (pool of {size})"),
            Err(e) => eprintln!("ERROR cannot connect to the database at {host}: {e}"),
        }
    });
    Some(pool)
}

/// The four routes, answering 503 without a database.
pub fn routes(pool: Option<Pool>) -> Router {
    Router::new()
        .route("/db", get(db))
        .route("/queries", get(queries))
        .route("/fortunes", get(fortunes))
        .route("/updates", get(updates))
        .with_state(pool)
}

fn unavailable(e: impl std::fmt::Display) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, format!("database: {e}")).into_response()
}

fn random_id() -> i32 {
    fastrand::i32(1..=10_000)
}

async fn client(pool: &Option<Pool>) -> Result<deadpool_postgres::Client, Response> {
    let pool = pool
        .as_ref()
        .ok_or_else(|| unavailable("none configured"))?;
    pool.get().await.map_err(unavailable)
}

async fn read(client: &deadpool_postgres::Client, n: usize) -> Result<Vec<World>, Response> {
    let stmt = client.prepare_cached(READ).await.map_err(unavailable)?;
    let reads = (0..n).map(|_| {
        let stmt = &stmt;
        async move { client.query_one(stmt, &[&random_id()]).await }
    });
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

async fn db(State(pool): State<Option<Pool>>) -> Response {
    let c = match client(&pool).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    match read(&c, 1).await {
        Ok(mut rows) => Json(rows.remove(0)).into_response(),
        Err(r) => r,
    }
}

async fn queries(State(pool): State<Option<Pool>>, Query(q): Query<Count>) -> Response {
    let c = match client(&pool).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    match read(&c, q.get()).await {
        Ok(rows) => Json(rows).into_response(),
        Err(r) => r,
    }
}

async fn fortunes(State(pool): State<Option<Pool>>) -> Response {
    let c = match client(&pool).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let stmt = match c.prepare_cached("SELECT id, message FROM fortune").await {
        Ok(s) => s,
        Err(e) => return unavailable(e),
    };
    let mut rows: Vec<(i32, String)> = match c.query(&stmt, &[]).await {
        Ok(rows) => rows.iter().map(|r| (r.get(0), r.get(1))).collect(),
        Err(e) => return unavailable(e),
    };
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
    // Html: text/html; charset=utf-8.
    Html(page).into_response()
}

async fn updates(State(pool): State<Option<Pool>>, Query(q): Query<Count>) -> Response {
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
    let writes = rows.iter().map(|row| {
        let stmt = &stmt;
        let c = &c;
        async move { c.execute(stmt, &[&row.id, &row.random_number]).await }
    });
    for done in futures_util::future::join_all(writes).await {
        if let Err(e) = done {
            return unavailable(e);
        }
    }
    Json(rows).into_response()
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

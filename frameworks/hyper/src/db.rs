//! The database scenarios (db, queries, fortunes, updates) the way
//! TechEmpower's hyper entries serve a database: a fixed set of
//! tokio-postgres connections (FAIRGROUND_DB_POOL of them), each with its
//! statements prepared once, picked round-robin per request; tokio-postgres
//! pipelines the queries that share a connection. One SELECT per row and
//! one UPDATE per row. The connections are opened in the background at
//! start and again on demand while the database does not answer.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;
use tokio::sync::OnceCell;
use tokio_postgres::{Client, NoTls, Statement};

use crate::{json, Resp};

const READ: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const WRITE: &str = "UPDATE world SET randomnumber = $2 WHERE id = $1";
const FORTUNES: &str = "SELECT id, message FROM fortune";
const ADDED: &str = "Additional fortune added at request time.";
const HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");

#[derive(Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

/// One connection and its prepared statements.
struct Conn {
    client: Client,
    read: Statement,
    write: Statement,
    fortunes: Statement,
}

pub struct Db {
    config: tokio_postgres::Config,
    host: String,
    size: usize,
    conns: OnceCell<Vec<Conn>>,
    next: AtomicUsize,
}

impl Db {
    /// The database, when fairground gave the server one.
    pub fn from_env() -> Option<Db> {
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
        let size = var("FAIRGROUND_DB_POOL", "8")
            .parse()
            .unwrap_or(8usize)
            .max(1);
        Some(Db {
            config,
            host,
            size,
            conns: OnceCell::new(),
            next: AtomicUsize::new(0),
        })
    }

    /// Opens the connections now (called once at start, in the background)
    /// so an unreachable database is reported early.
    pub async fn open(&self) {
        match self.conns().await {
            Ok(_) => eprintln!(
                "hyper database at {} ready ({} connections)",
                self.host, self.size
            ),
            Err(e) => eprintln!("ERROR cannot connect to the database at {}: {e}", self.host),
        }
    }

    async fn conns(&self) -> Result<&Vec<Conn>, tokio_postgres::Error> {
        self.conns
            .get_or_try_init(|| async {
                let mut conns = Vec::with_capacity(self.size);
                for _ in 0..self.size {
                    conns.push(self.connect().await?);
                }
                Ok(conns)
            })
            .await
    }

    async fn connect(&self) -> Result<Conn, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("database connection: {e}");
            }
        });
        let (read, write, fortunes) = futures_util::try_join!(
            client.prepare(READ),
            client.prepare(WRITE),
            client.prepare(FORTUNES)
        )?;
        Ok(Conn {
            client,
            read,
            write,
            fortunes,
        })
    }

    /// The next connection, round-robin.
    async fn conn(&self) -> Result<&Conn, tokio_postgres::Error> {
        let conns = self.conns().await?;
        Ok(&conns[self.next.fetch_add(1, Ordering::Relaxed) % conns.len()])
    }
}

/// TechEmpower's rule for `queries`: missing, empty, not a number or below
/// 1 is 1; above 500 is 500.
pub fn count(query: Option<&str>) -> usize {
    let n = query
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("queries=")))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(1);
    n.clamp(1, 500) as usize
}

fn unavailable(e: impl std::fmt::Display) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(format!("database: {e}"))));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r
}

fn random_id() -> i32 {
    fastrand::i32(1..=10_000)
}

async fn read(conn: &Conn, n: usize) -> Result<Vec<World>, tokio_postgres::Error> {
    let reads =
        (0..n).map(|_| async move { conn.client.query_one(&conn.read, &[&random_id()]).await });
    futures_util::future::try_join_all(reads).await.map(|rows| {
        rows.iter()
            .map(|row| World {
                id: row.get(0),
                random_number: row.get(1),
            })
            .collect()
    })
}

/// GET /db, /queries, /fortunes, /updates; None for any other path.
pub async fn route(db: Option<&Db>, path: &str, query: Option<&str>) -> Option<Resp> {
    let scenario = match path {
        "/db" | "/queries" | "/fortunes" | "/updates" => path,
        _ => return None,
    };
    let Some(db) = db else {
        return Some(unavailable("none configured"));
    };
    let conn = match db.conn().await {
        Ok(c) => c,
        Err(e) => return Some(unavailable(e)),
    };
    let answer = match scenario {
        "/db" => read(conn, 1).await.map(|rows| json(&rows[0])),
        "/queries" => read(conn, count(query)).await.map(|rows| json(&rows)),
        "/fortunes" => fortunes(conn).await,
        _ => updates(conn, count(query)).await,
    };
    Some(answer.unwrap_or_else(unavailable))
}

async fn fortunes(conn: &Conn) -> Result<Resp, tokio_postgres::Error> {
    let mut rows: Vec<(i32, String)> = conn
        .client
        .query(&conn.fortunes, &[])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
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
    let mut r = Response::new(Full::new(Bytes::from(page)));
    r.headers_mut().insert(CONTENT_TYPE, HTML);
    Ok(r)
}

async fn updates(conn: &Conn, n: usize) -> Result<Resp, tokio_postgres::Error> {
    let mut rows = read(conn, n).await?;
    for row in &mut rows {
        row.random_number = random_id();
    }
    let writes = rows.iter().map(|row| async move {
        conn.client
            .execute(&conn.write, &[&row.id, &row.random_number])
            .await
    });
    futures_util::future::try_join_all(writes).await?;
    Ok(json(&rows))
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

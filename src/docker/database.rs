//! The database container of the database scenarios: PostgreSQL from the
//! `postgres` base, run as user `postgres` with a read-only root and its
//! data on a tmpfs, initialised, seeded ([`contract::db::seed_sql`]) and
//! only then listening on the run's network, so "accepts connections"
//! means "seeded".
//!
//! Also the SQL fairground itself asks of it (`psql` through `docker
//! exec` on the container's own socket, or a connection of the lab's own):
//! readiness, the work counters (rows the executor read and wrote in
//! `world` and `fortune`, from `pg_stat_user_tables`, and statements from
//! `pg_stat_statements`), the rows verification compares answers with, and
//! the changes it makes behind the server's back.
//!
//! Two roles: the framework's ([`db::DB_USER`], an ordinary role that may
//! read the tables and update `world`, owns nothing and can create nothing)
//! and fairground's own [`ADMIN_USER`], the cluster's superuser, whose
//! password is drawn per database and given to no framework.
//!
//! The table counters lag: a PostgreSQL 15 backend adds its pending counts
//! to shared memory at most once per [`STATS_FLUSH_MIN`] when it goes idle,
//! and a backend that went idle sooner than that after its last flush waits
//! up to [`STATS_IDLE_FLUSH`] before flushing (`PGSTAT_MIN_INTERVAL`,
//! `PGSTAT_IDLE_INTERVAL` in its pgstat.c). Readers wait for the counts to
//! settle ([`SETTLE_WITHIN`]) instead of trusting a reading taken at once,
//! and hurry them with a few requests a second after the load
//! ([`settled_counts`]): a backend that serves one then flushes at once.
//! fairground's own work in the tables is read from
//! `pg_stat_xact_user_tables` before its transaction commits, flushed at
//! once (`pg_stat_force_next_flush`), and taken off every reading.

use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::contract::{db, Scenario};
use crate::plan::spec::DatabaseSpec;

use super::container::{ContainerSpec, Role};
use super::engine::{Engine, Handle};
use super::RunId;

/// How often readiness is asked while the database starts.
const READY_EVERY: Duration = Duration::from_millis(200);
/// Longest one `psql` may take.
const SQL_TIMEOUT: Duration = Duration::from_secs(30);

/// fairground's own role: the cluster's superuser (initdb's), which reads
/// the counters and changes the tables; its password is drawn per database.
pub const ADMIN_USER: &str = "fairground_admin";

/// A backend adds its table counts to shared memory at most this often.
pub const STATS_FLUSH_MIN: Duration = Duration::from_secs(1);
/// A backend that went idle within [`STATS_FLUSH_MIN`] of its last flush
/// flushes after this long idle.
pub const STATS_IDLE_FLUSH: Duration = Duration::from_secs(10);
/// Longest a reader waits for every backend's counts to arrive after the
/// traffic stopped: [`STATS_IDLE_FLUSH`] and a margin for the timer.
pub const SETTLE_WITHIN: Duration = Duration::from_millis(11_500);

/// A started, seeded database.
#[derive(Debug, Clone)]
pub struct StartedDatabase {
    /// Its container.
    pub handle: Handle,
    /// Its address on the run's network.
    pub ip: String,
    /// [`ADMIN_USER`]'s password, drawn for this database.
    pub admin_password: String,
    /// From asking for the container to its first accepted connection
    /// (initdb and the seed included).
    pub ready_after: Duration,
}

/// Start the database of `spec` as `name` on `network` and wait until it
/// is seeded and listening; on failure it is removed and the error shows
/// its log.
pub async fn start<E: Engine>(
    engine: &E,
    run: &RunId,
    name: String,
    spec: &DatabaseSpec,
    network: &str,
) -> anyhow::Result<StartedDatabase> {
    let asked = Instant::now();
    let admin_password = admin_password();
    let c = container(run, name, spec, network, &admin_password);
    let handle = engine
        .start_container(&c)
        .await
        .context("starting the database container")?;
    let result = async {
        let ip = handle
            .ip
            .clone()
            .context("the database container has no address on the run network")?;
        loop {
            let state = engine.exit_state(&handle).await?;
            if !state.running {
                let tail = engine.logs_tail(&handle, 40).await.unwrap_or_default();
                anyhow::bail!(
                    "the database container {} exited before it was ready ({}); its log:\n{tail}",
                    handle.name,
                    state.describe()
                );
            }
            if engine
                .exec_to_exit(&handle, &ready_check(), Duration::from_secs(5), None)
                .await
                .is_ok()
            {
                return Ok(StartedDatabase {
                    handle: handle.clone(),
                    ip,
                    admin_password: admin_password.clone(),
                    ready_after: asked.elapsed(),
                });
            }
            if asked.elapsed() > spec.readiness_timeout {
                let tail = engine.logs_tail(&handle, 40).await.unwrap_or_default();
                anyhow::bail!(
                    "the database container {} was not seeded and listening within {:?} \
                     (raise `readiness_timeout` on a slow machine); its log:\n{tail}",
                    handle.name,
                    spec.readiness_timeout
                );
            }
            tokio::time::sleep(READY_EVERY).await;
        }
    }
    .await;
    if result.is_err() {
        let _ = engine.remove(&handle).await;
    }
    result
}

/// What `scenario` needs of the executor per response: the table it
/// reads, rows of it read, and rows of `world` written (`updates-N`: its
/// distinct ids, N less the repeats N random ids out of 10,000 bring).
/// An `updates-N` response reads its N rows and each write looks its row
/// up again (PostgreSQL counts that fetch as a read), so its reads are N
/// plus its writes: a server that writes without reading falls short.
/// `None` for a scenario without a database.
pub fn required_work(scenario: Scenario) -> Option<(&'static str, f64, Option<f64>)> {
    let n = |n: u16| f64::from(db::queries_count(Some(&n.to_string())));
    match scenario {
        Scenario::Db => Some(("world", 1.0, None)),
        Scenario::Queries(k) => Some(("world", n(k), None)),
        Scenario::Fortunes => Some(("fortune", db::FORTUNES.len() as f64, None)),
        Scenario::Updates(k) => {
            let w = f64::from(db::WORLD_ROWS);
            let written = w * (1.0 - (1.0 - 1.0 / w).powf(n(k)));
            Some(("world", n(k) + written, Some(written)))
        }
        _ => None,
    }
}

/// The counts since `start` (read at the window's start), read over
/// `client` until `enough` says they reach what the answers need or until
/// [`SETTLE_WITHIN`] after the last request, when every backend has
/// flushed what it kept: an honest server's counts are whole as soon as
/// they reach its need, a liar's never do and are read once they are
/// whole.
///
/// Waiting out a backend's 10 s is the slow path: [`NUDGE_AFTER`] after
/// the load (and again after each nudge, at most [`NUDGES`] times) `nudge`
/// sends a few requests to the server. A backend that serves one flushes
/// everything it kept as it goes idle (its last flush is then over
/// [`STATS_FLUSH_MIN`] old). What a nudge itself needs of the counted
/// table (rows it returns; nothing when it reads another table) joins the
/// need: `enough` is asked with it. Returns the counts and how long after
/// the load's end they were read.
pub async fn settled_counts(
    client: &tokio_postgres::Client,
    start: &StatementCounts,
    enough: impl Fn(&StatementCounts, u64) -> bool,
    load_ended: Instant,
    nudge: &mut impl Nudge,
) -> anyhow::Result<(StatementCounts, Duration)> {
    let mut settle = Settle::new(load_ended);
    loop {
        let d = start.since(counts_over(client).await?);
        match settle.next(enough(&d, nudge.rows())) {
            Step::Done => return Ok((d, load_ended.elapsed())),
            Step::Nudge => {
                let answered = nudge.nudge().await;
                settle.nudged(answered);
            }
            Step::Wait(t) => tokio::time::sleep(t).await,
        }
    }
}

/// Requests that make the database's backends flush their counts.
#[allow(async_fn_in_trait)] // used in one task; no Send bound needed
pub trait Nudge {
    /// Send one wave of requests: how many were answered 2xx.
    async fn nudge(&mut self) -> u64;
    /// Rows of the counted table the waves so far need read.
    fn rows(&self) -> u64;
}

/// First nudge after the load, and between nudges: a backend's last flush
/// is then older than [`STATS_FLUSH_MIN`], so its next idle flushes.
pub const NUDGE_AFTER: Duration = Duration::from_millis(1_100);
/// Most nudges of one settling read: an honest pool has flushed by then
/// (each nudge reaches most of its connections), and a liar's wait ends
/// [`SETTLE_WITHIN`] after the last.
pub const NUDGES: u32 = 3;
/// How often a settling count is read again.
pub const SETTLE_EVERY: Duration = Duration::from_millis(250);

/// The schedule of a settling read: read, nudge or wait, and when to give
/// up (every backend has flushed [`SETTLE_WITHIN`] after the last request
/// it served, the load's or a nudge's).
#[derive(Debug, Clone)]
pub struct Settle {
    last_request: Instant,
    nudges: u32,
    /// 2xx answers of the nudges so far.
    pub nudged: u64,
}

/// What a settling read does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The counts are whole (enough, or past every backend's flush).
    Done,
    /// Send a nudge now.
    Nudge,
    /// Read again after this long.
    Wait(Duration),
}

impl Settle {
    /// A settling read of work whose last request ended at `ended`.
    pub fn new(ended: Instant) -> Self {
        Settle {
            last_request: ended,
            nudges: 0,
            nudged: 0,
        }
    }

    /// The next step after a reading that was (or was not) `enough`.
    pub fn next(&self, enough: bool) -> Step {
        let since = self.last_request.elapsed();
        if enough || since >= SETTLE_WITHIN {
            Step::Done
        } else if self.nudges < NUDGES && since >= NUDGE_AFTER {
            Step::Nudge
        } else {
            Step::Wait(SETTLE_EVERY)
        }
    }

    /// A nudge was sent and `answered` of it answered 2xx.
    pub fn nudged(&mut self, answered: u64) {
        self.nudges += 1;
        self.nudged += answered;
        self.last_request = Instant::now();
    }
}

/// A password for [`ADMIN_USER`]: 32 random letters and digits (nothing a
/// shell or SQL string would need quoted).
fn admin_password() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    (0..32)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// Run `sql` in the database (as its superuser, on its socket) and return
/// what `psql` printed (unaligned, tuples only).
pub async fn query<E: Engine>(engine: &E, h: &Handle, sql: &str) -> anyhow::Result<String> {
    let out = engine
        .exec_to_exit(h, &psql(sql), SQL_TIMEOUT, None)
        .await
        .with_context(|| format!("asking the database: {}", crate::contract::quote(sql)))?;
    Ok(out.stdout)
}

/// The statement counts so far.
pub async fn counts<E: Engine>(engine: &E, h: &Handle) -> anyhow::Result<StatementCounts> {
    let out = query(engine, h, COUNTS_SQL).await?;
    StatementCounts::parse(&out).map_err(anyhow::Error::msg)
}

/// A connection from here to the database at `ip` (its address on the
/// run's network), for reading statement counts while a round runs: one
/// query on an open connection, where a `docker exec` of `psql` would
/// spend the shared core's time on a process start inside the window.
pub async fn connect(database: &StartedDatabase) -> anyhow::Result<tokio_postgres::Client> {
    let ip = &database.ip;
    let config = format!(
        "host={ip} port={} dbname={} user={ADMIN_USER} password={} connect_timeout=5",
        db::DB_PORT,
        db::DB_NAME,
        database.admin_password
    );
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls)
        .await
        .with_context(|| format!("connecting to the database at {ip}:{}", db::DB_PORT))?;
    tokio::spawn(async move {
        // Ends when the client is dropped or the database goes away.
        let _ = connection.await;
    });
    Ok(client)
}

/// The statement counts so far, over `client`.
pub async fn counts_over(client: &tokio_postgres::Client) -> anyhow::Result<StatementCounts> {
    let row = client
        .query_one(COUNTS_SQL, &[])
        .await
        .context("reading pg_stat_statements")?;
    let f = |i: usize| -> anyhow::Result<u64> {
        let v: i64 = row.try_get(i)?;
        Ok(v.max(0) as u64)
    };
    Ok(StatementCounts {
        world_reads: f(0)?,
        world_updates: f(1)?,
        rows_updated: f(2)?,
        fortune_reads: f(3)?,
        total: f(4)?,
        at_unix_us: f(5)?,
        world_rows_read: f(6)?,
        world_rows_written: f(7)?,
        fortune_rows_read: f(8)?,
    })
}

/// Rows of the contract's tables one of fairground's own transactions read
/// and wrote, as `pg_stat_xact_user_tables` counted them before it
/// committed: taken off every later reading of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnWork {
    /// Rows of `world` read (sequential and index fetches).
    pub world_rows_read: u64,
    /// Rows of `world` updated.
    pub world_rows_written: u64,
    /// Rows of `fortune` read.
    pub fortune_rows_read: u64,
}

impl OwnWork {
    /// Both together.
    pub fn plus(self, o: OwnWork) -> OwnWork {
        OwnWork {
            world_rows_read: self.world_rows_read + o.world_rows_read,
            world_rows_written: self.world_rows_written + o.world_rows_written,
            fortune_rows_read: self.fortune_rows_read + o.fortune_rows_read,
        }
    }
}

/// What the current transaction did to the contract's tables so far.
const OWN_WORK_SQL: &str = "/* fairground */ SELECT 'fairground-own', \
     coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)) FILTER (WHERE relname = 'world'), 0)::bigint, \
     coalesce(sum(n_tup_upd) FILTER (WHERE relname = 'world'), 0)::bigint, \
     coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)) FILTER (WHERE relname = 'fortune'), 0)::bigint \
     FROM pg_stat_xact_user_tables WHERE relname IN ('world', 'fortune')";

/// Run `sql` (one statement) as fairground's own work: inside a
/// transaction whose reads and writes of the contract's tables are counted
/// before it commits and flushed to the counters before this returns.
/// What `sql` printed, and that work.
pub async fn own_work<E: Engine>(
    engine: &E,
    h: &Handle,
    sql: &str,
) -> anyhow::Result<(String, OwnWork)> {
    let cmd = psql_session(&[
        "BEGIN",
        sql,
        OWN_WORK_SQL,
        "COMMIT",
        "/* fairground */ SELECT pg_stat_force_next_flush()",
    ]);
    let out = engine
        .exec_to_exit(h, &cmd, SQL_TIMEOUT, None)
        .await
        .with_context(|| format!("asking the database: {}", crate::contract::quote(sql)))?;
    split_own_work(&out.stdout).map_err(anyhow::Error::msg)
}

/// `sql`'s output and the [`OWN_WORK_SQL`] line of an [`own_work`] session.
pub fn split_own_work(out: &str) -> Result<(String, OwnWork), String> {
    let mut printed = String::new();
    let mut work = None;
    for line in out.lines() {
        match line.strip_prefix("fairground-own|") {
            Some(rest) => {
                let f: Vec<u64> = rest
                    .split('|')
                    .map(|x| x.trim().parse::<u64>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| format!("unexpected own-work line `{line}`"))?;
                let [r, w, fr] = f[..] else {
                    return Err(format!("unexpected own-work line `{line}`"));
                };
                work = Some(OwnWork {
                    world_rows_read: r,
                    world_rows_written: w,
                    fortune_rows_read: fr,
                });
            }
            None if work.is_none() => {
                printed.push_str(line);
                printed.push('\n');
            }
            None => {}
        }
    }
    work.map(|w| (printed, w))
        .ok_or_else(|| format!("no own-work line in `{}`", out.trim()))
}

/// The stored `randomnumber` of each of `ids`, and the rows reading them
/// cost (fairground's own work).
pub async fn world_rows<E: Engine>(
    engine: &E,
    h: &Handle,
    ids: &[u32],
) -> anyhow::Result<(std::collections::BTreeMap<u32, u32>, OwnWork)> {
    let (out, work) = own_work(engine, h, &world_rows_sql(ids)).await?;
    Ok((
        parse_world_rows(&out)
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .collect(),
        work,
    ))
}

/// Change every row of `world` to a number it did not hold (a cache of
/// any kind answers the old one afterwards).
pub const CHANGE_WORLD_SQL: &str = "/* fairground */ UPDATE world SET randomnumber = \
     1 + (randomnumber + floor(random() * 9999)::integer) % 10000";

/// The `fortune` row fairground adds between verification bursts: markup
/// a page must escape, and an id no published row has.
pub const ADDED_ROW_ID: i32 = 1_000;
/// Its message.
pub const ADDED_ROW_MESSAGE: &str =
    "<b>fairground changed this table</b> & \"nobody's\" cache saw it";

/// SQL that adds [`ADDED_ROW_MESSAGE`].
pub fn add_fortune_sql() -> String {
    format!(
        "/* fairground */ INSERT INTO fortune (id, message) VALUES ({ADDED_ROW_ID}, '{}')",
        ADDED_ROW_MESSAGE.replace('\'', "''")
    )
}

/// SQL that takes it away again.
pub fn remove_fortune_sql() -> String {
    format!("/* fairground */ DELETE FROM fortune WHERE id = {ADDED_ROW_ID}")
}

/// Where PostgreSQL's binaries are in Debian's postgresql-15.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// The tmpfs its data lives on (the cluster is a folder inside, made by
/// initdb with the modes PostgreSQL insists on). A path the image does not
/// have: Docker copies an existing folder's owner and mode onto a tmpfs
/// mounted over it, and would ignore `mode=1777`.
pub const DATA_MOUNT: &str = "/run/fairground/db";
/// The folder of its Unix socket (in the /tmp tmpfs of a read-only root).
pub const SOCKET_DIR: &str = "/tmp";

/// The container of `spec` named `name` on `network`.
pub fn container(
    run: &RunId,
    name: String,
    spec: &DatabaseSpec,
    network: &str,
    admin_password: &str,
) -> ContainerSpec {
    let mut c = ContainerSpec::new(run, Role::Database, name, spec.image.clone());
    c.network = Some(network.to_string());
    c.limits = spec.resources.clone();
    c.read_only_rootfs = true;
    c.user = Some("postgres".into());
    // 1777: the container's user (whatever uid Debian gave `postgres`)
    // makes the cluster folder inside; initdb sets its mode to 0700.
    c.tmpfs.insert(
        DATA_MOUNT.into(),
        format!(
            "rw,nosuid,nodev,mode=1777,size={}",
            spec.resources.memory_bytes.unwrap_or(1 << 30)
        ),
    );
    c.entrypoint = Some(vec!["/bin/sh".into(), "-c".into()]);
    c.cmd = vec![start_script(spec, admin_password)];
    c
}

/// The server's settings on its command line.
fn settings(spec: &DatabaseSpec) -> String {
    format!(
        "-c listen_addresses='*' -c unix_socket_directories={SOCKET_DIR} \
         -c shared_buffers={}kB -c max_connections={} -c synchronous_commit={} \
         -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all \
         -c pg_stat_statements.max=10000 -c log_min_messages=warning",
        spec.shared_buffers / 1024,
        spec.max_connections,
        if spec.synchronous_commit { "on" } else { "off" }
    )
}

/// The container's whole life: initdb, a socket-only server to seed, then
/// the real server in the foreground (PID 1 of the container, so Docker's
/// stop reaches it). initdb's superuser is fairground's [`ADMIN_USER`];
/// the seed makes the framework's ordinary role.
pub fn start_script(spec: &DatabaseSpec, admin_password: &str) -> String {
    let data = format!("{DATA_MOUNT}/cluster");
    format!(
        "set -eu\n\
         printf '%s\\n' '{pw}' > /tmp/pw\n\
         {PG_BIN}/initdb -D {data} -U {user} --pwfile=/tmp/pw --auth-local=trust \
         --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 --no-sync > /tmp/initdb.log 2>&1 \
         || {{ cat /tmp/initdb.log >&2; exit 1; }}\n\
         rm /tmp/pw\n\
         echo 'host all all all scram-sha-256' >> {data}/pg_hba.conf\n\
         {PG_BIN}/pg_ctl -D {data} -w -l /tmp/seed.log \
         -o \"-c listen_addresses='' -c unix_socket_directories={SOCKET_DIR} \
         -c shared_preload_libraries=pg_stat_statements\" start > /dev/null \
         || {{ cat /tmp/seed.log >&2; exit 1; }}\n\
         psql -h {SOCKET_DIR} -U {user} -d postgres -v ON_ERROR_STOP=1 -q -c 'CREATE DATABASE {name}'\n\
         psql -h {SOCKET_DIR} -U {user} -d {name} -v ON_ERROR_STOP=1 -q <<'FAIRGROUND_SEED'\n\
         {seed}FAIRGROUND_SEED\n\
         {PG_BIN}/pg_ctl -D {data} -w stop > /dev/null\n\
         echo 'fairground: database seeded; listening' >&2\n\
         exec {PG_BIN}/postgres -D {data} {settings}\n",
        pw = admin_password,
        user = ADMIN_USER,
        name = db::DB_NAME,
        seed = db::seed_sql(),
        settings = settings(spec),
    )
}

/// `psql` running `sql` on the database through its socket, unaligned and
/// tuples only (`|` between fields), stopping at the first error.
pub fn psql(sql: &str) -> Vec<String> {
    psql_session(&[sql])
}

/// `psql` running `statements` in order in one session (one `-c` each).
pub fn psql_session(statements: &[&str]) -> Vec<String> {
    let mut cmd: Vec<String> = [
        "psql",
        "-h",
        SOCKET_DIR,
        "-U",
        ADMIN_USER,
        "-d",
        db::DB_NAME,
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
    ]
    .map(String::from)
    .to_vec();
    for s in statements {
        cmd.push("-c".into());
        cmd.push(s.to_string());
    }
    cmd
}

/// Answers once the server listens on the network (after seeding).
pub fn ready_check() -> Vec<String> {
    [
        "pg_isready",
        "-q",
        "-h",
        "127.0.0.1",
        "-p",
        &db::DB_PORT.to_string(),
        "-U",
        db::DB_USER,
        "-d",
        db::DB_NAME,
    ]
    .map(String::from)
    .to_vec()
}

/// Statement counts from `pg_stat_statements`, over the statements that
/// touch the contract's tables (fairground's own, run through this module,
/// read the catalog or carry a `fairground` comment and are left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatementCounts {
    /// Statements that read `world` (SELECT … FROM world …).
    pub world_reads: u64,
    /// Statements that update `world`.
    pub world_updates: u64,
    /// Rows those updates changed.
    pub rows_updated: u64,
    /// Statements that read `fortune`.
    pub fortune_reads: u64,
    /// Every statement of the contract's tables.
    pub total: u64,
    /// When the database read them: its clock (the host's), µs since the
    /// Unix epoch, taken as the first row of the snapshot is aggregated
    /// (the view is materialized before any row is returned), not after
    /// the aggregation: on a core the database shares with a busy server
    /// the query can be preempted midway, and a clock read at its end is
    /// the likeliest reason one known-answer run counted 3% more queries
    /// than its span (about 57 ms of load) at the window's rate.
    pub at_unix_us: u64,
    /// Rows of `world` the executor read (`seq_tup_read + idx_tup_fetch`
    /// of `pg_stat_user_tables`): work, whatever the statements' text.
    pub world_rows_read: u64,
    /// Rows of `world` updated (`n_tup_upd`; rolled-back ones included).
    pub world_rows_written: u64,
    /// Rows of `fortune` the executor read.
    pub fortune_rows_read: u64,
}

/// The SQL [`StatementCounts`] are read with.
pub const COUNTS_SQL: &str = "/* fairground */ SELECT \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\mselect\\M' AND query ~* '\\mworld\\M' AND query !~* '\\mupdate\\M'), 0)::bigint, \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\mupdate\\M' AND query ~* '\\mworld\\M'), 0)::bigint, \
     coalesce(sum(rows) FILTER (WHERE query ~* '\\mupdate\\M' AND query ~* '\\mworld\\M'), 0)::bigint, \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\mfortune\\M'), 0)::bigint, \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\m(world|fortune)\\M'), 0)::bigint, \
     (extract(epoch FROM coalesce(min(clock_timestamp()), clock_timestamp())) * 1000000)::bigint, \
     (SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) FROM pg_stat_user_tables WHERE relname = 'world')::bigint, \
     (SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables WHERE relname = 'world')::bigint, \
     (SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) FROM pg_stat_user_tables WHERE relname = 'fortune')::bigint \
     FROM pg_stat_statements WHERE query NOT LIKE '%fairground%' \
     AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())";

impl StatementCounts {
    /// Parse `psql`'s answer to [`COUNTS_SQL`].
    pub fn parse(out: &str) -> Result<Self, String> {
        let fields: Vec<u64> = out
            .trim()
            .split('|')
            .map(|f| f.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("unexpected pg_stat_statements answer `{}`", out.trim()))?;
        match fields[..] {
            [world_reads, world_updates, rows_updated, fortune_reads, total, at_unix_us, world_rows_read, world_rows_written, fortune_rows_read] => {
                Ok(Self {
                    world_reads,
                    world_updates,
                    rows_updated,
                    fortune_reads,
                    total,
                    at_unix_us,
                    world_rows_read,
                    world_rows_written,
                    fortune_rows_read,
                })
            }
            _ => Err(format!(
                "unexpected pg_stat_statements answer `{}`",
                out.trim()
            )),
        }
    }

    /// What happened between `self` (before) and `after`.
    pub fn since(self, after: StatementCounts) -> StatementCounts {
        StatementCounts {
            world_reads: after.world_reads.saturating_sub(self.world_reads),
            world_updates: after.world_updates.saturating_sub(self.world_updates),
            rows_updated: after.rows_updated.saturating_sub(self.rows_updated),
            fortune_reads: after.fortune_reads.saturating_sub(self.fortune_reads),
            total: after.total.saturating_sub(self.total),
            at_unix_us: after.at_unix_us,
            world_rows_read: after.world_rows_read.saturating_sub(self.world_rows_read),
            world_rows_written: after
                .world_rows_written
                .saturating_sub(self.world_rows_written),
            fortune_rows_read: after
                .fortune_rows_read
                .saturating_sub(self.fortune_rows_read),
        }
    }

    /// These counts without fairground's own `work`.
    pub fn without(self, work: OwnWork) -> StatementCounts {
        StatementCounts {
            world_rows_read: self.world_rows_read.saturating_sub(work.world_rows_read),
            world_rows_written: self
                .world_rows_written
                .saturating_sub(work.world_rows_written),
            fortune_rows_read: self
                .fortune_rows_read
                .saturating_sub(work.fortune_rows_read),
            ..self
        }
    }
}

/// The SQL that reads `world` rows `ids` as `id|randomnumber` lines.
pub fn world_rows_sql(ids: &[u32]) -> String {
    let list: Vec<String> = ids.iter().map(u32::to_string).collect();
    format!(
        "/* fairground */ SELECT id, randomnumber FROM world WHERE id IN ({}) ORDER BY id",
        if list.is_empty() {
            "NULL".to_string()
        } else {
            list.join(",")
        }
    )
}

/// Parse `id|randomnumber` lines.
pub fn parse_world_rows(out: &str) -> Result<Vec<(u32, u32)>, String> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (a, b) = l
                .split_once('|')
                .ok_or_else(|| format!("unexpected row `{l}`"))?;
            Ok((
                a.trim()
                    .parse()
                    .map_err(|_| format!("unexpected id `{a}`"))?,
                b.trim()
                    .parse()
                    .map_err(|_| format!("unexpected number `{b}`"))?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::spec::Resources;

    fn spec() -> DatabaseSpec {
        DatabaseSpec {
            image: "fairground/base-postgres:x".into(),
            resources: Resources {
                cpuset: Some("0".into()),
                cpus: Some(1.0),
                memory_bytes: Some(512 << 20),
                nofile: Some(4096),
            },
            shared_buffers: 128 << 20,
            max_connections: 100,
            synchronous_commit: false,
            pool: 16,
            readiness_timeout: std::time::Duration::from_secs(30),
            shares_cores_with: Some("the server".into()),
        }
    }

    #[test]
    fn the_container_runs_unprivileged_on_a_read_only_root_with_its_settings() {
        let c = container(&RunId("r".into()), "db".into(), &spec(), "net", "pw");
        assert_eq!(c.user.as_deref(), Some("postgres"));
        assert!(c.read_only_rootfs);
        assert_eq!(c.role, Role::Database);
        assert!(c.tmpfs[DATA_MOUNT].contains("mode=1777"));
        let script = &c.cmd[0];
        assert!(script.contains(
            "-c shared_buffers=131072kB -c max_connections=100 -c synchronous_commit=off"
        ));
        assert!(script.contains("CREATE TABLE world"));
        // Listening on the network only after the seed.
        assert!(
            script.find("FAIRGROUND_SEED\n").unwrap()
                < script.find("listen_addresses='*'").unwrap()
        );
        let body = c.to_create_body();
        assert_eq!(body.user.as_deref(), Some("postgres"));
        assert!(body
            .host_config
            .unwrap()
            .tmpfs
            .unwrap()
            .contains_key("/tmp"));
    }

    #[test]
    fn counts_and_rows_parse() {
        let c = StatementCounts::parse("10|2|40|3|15|1700000000000000|500|40|36\n").unwrap();
        assert_eq!(c.rows_updated, 40);
        assert_eq!(c.at_unix_us, 1_700_000_000_000_000);
        assert_eq!(c.fortune_rows_read, 36);
        let d = StatementCounts::parse("4|1|20|1|6|1|100|20|12")
            .unwrap()
            .since(c);
        assert_eq!(d.world_reads, 6);
        assert_eq!((d.world_rows_read, d.world_rows_written), (400, 20));
        let own = OwnWork {
            world_rows_read: 10_000,
            world_rows_written: 10_000,
            fortune_rows_read: 0,
        };
        let mine = StatementCounts {
            world_rows_read: 10_400,
            world_rows_written: 10_020,
            ..d
        };
        assert_eq!(mine.without(own), d);
        assert!(StatementCounts::parse("1|2").is_err());
        assert_eq!(parse_world_rows("1|5\n7|9\n"), Ok(vec![(1, 5), (7, 9)]));
        assert!(world_rows_sql(&[3, 1]).contains("IN (3,1)"));
    }

    #[test]
    fn own_work_is_split_from_what_the_statement_printed() {
        let (printed, w) = split_own_work("1|5\n7|9\nfairground-own|2|0|0\n\n").unwrap();
        assert_eq!(printed, "1|5\n7|9\n");
        assert_eq!(w.world_rows_read, 2);
        assert!(split_own_work("1|5\n").is_err());
        let cmd = psql_session(&["BEGIN", "SELECT 1"]);
        assert_eq!(cmd.iter().filter(|a| *a == "-c").count(), 2);
        assert!(cmd.contains(&ADMIN_USER.to_string()));
    }

    #[test]
    fn settling_nudges_a_second_after_the_last_request_three_times_then_waits_out_the_flush() {
        let ago = |d: Duration| Instant::now().checked_sub(d).unwrap();
        // Enough at once: done, nothing sent.
        assert_eq!(Settle::new(Instant::now()).next(true), Step::Done);
        // Within the first second: wait; after it: nudge.
        assert_eq!(
            Settle::new(Instant::now()).next(false),
            Step::Wait(SETTLE_EVERY)
        );
        let mut s = Settle::new(ago(NUDGE_AFTER));
        assert_eq!(s.next(false), Step::Nudge);
        // A nudge restarts both clocks: the next is a second later, and the
        // last request is now the nudge's.
        s.nudged(16);
        assert_eq!(s.next(false), Step::Wait(SETTLE_EVERY));
        assert_eq!(s.nudged, 16);
        for _ in 1..NUDGES {
            s.last_request = ago(NUDGE_AFTER);
            assert_eq!(s.next(false), Step::Nudge);
            s.nudged(15);
        }
        assert_eq!(s.nudged, 16 + 15 * u64::from(NUDGES - 1));
        // Out of nudges: wait until every backend flushed what the last
        // nudge left, then read the counts as whole.
        s.last_request = ago(NUDGE_AFTER * 2);
        assert_eq!(s.next(false), Step::Wait(SETTLE_EVERY));
        s.last_request = ago(SETTLE_WITHIN);
        assert_eq!(s.next(false), Step::Done);
        // A load that ended long ago is read as whole at once.
        assert_eq!(Settle::new(ago(SETTLE_WITHIN)).next(false), Step::Done);
    }
}

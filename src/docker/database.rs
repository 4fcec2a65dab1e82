//! The database container of the database scenarios: PostgreSQL from the
//! `postgres` base, run as user `postgres` with a read-only root and its
//! data on a tmpfs, initialised, seeded ([`contract::db::seed_sql`]) and
//! only then listening on the run's network, so "accepts connections"
//! means "seeded".
//!
//! Also the SQL fairground itself asks of it (`psql` through `docker
//! exec` on the container's own socket): readiness, statement counts from
//! `pg_stat_statements`, and the rows verification compares answers with.

use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::contract::db;
use crate::plan::spec::DatabaseSpec;

use super::container::{ContainerSpec, Role};
use super::engine::{Engine, Handle};
use super::RunId;

/// How often readiness is asked while the database starts.
const READY_EVERY: Duration = Duration::from_millis(200);
/// Longest one `psql` may take.
const SQL_TIMEOUT: Duration = Duration::from_secs(30);

/// A started, seeded database.
#[derive(Debug, Clone)]
pub struct StartedDatabase {
    /// Its container.
    pub handle: Handle,
    /// Its address on the run's network.
    pub ip: String,
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
    let c = container(run, name, spec, network);
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
pub async fn connect(ip: &str) -> anyhow::Result<tokio_postgres::Client> {
    let config = format!(
        "host={ip} port={} dbname={} user={} password={} connect_timeout=5",
        db::DB_PORT,
        db::DB_NAME,
        db::DB_USER,
        db::DB_PASSWORD
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
    })
}

/// The stored `randomnumber` of each of `ids`.
pub async fn world_rows<E: Engine>(
    engine: &E,
    h: &Handle,
    ids: &[u32],
) -> anyhow::Result<std::collections::BTreeMap<u32, u32>> {
    let out = query(engine, h, &world_rows_sql(ids)).await?;
    Ok(parse_world_rows(&out)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .collect())
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
pub fn container(run: &RunId, name: String, spec: &DatabaseSpec, network: &str) -> ContainerSpec {
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
    c.cmd = vec![start_script(spec)];
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
/// stop reaches it).
pub fn start_script(spec: &DatabaseSpec) -> String {
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
        pw = db::DB_PASSWORD,
        user = db::DB_USER,
        name = db::DB_NAME,
        seed = db::seed_sql(),
        settings = settings(spec),
    )
}

/// `psql` running `sql` on the database through its socket, unaligned and
/// tuples only (`|` between fields), stopping at the first error.
pub fn psql(sql: &str) -> Vec<String> {
    [
        "psql",
        "-h",
        SOCKET_DIR,
        "-U",
        db::DB_USER,
        "-d",
        db::DB_NAME,
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        sql,
    ]
    .map(String::from)
    .to_vec()
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
}

/// The SQL [`StatementCounts`] are read with.
pub const COUNTS_SQL: &str = "/* fairground */ SELECT \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\mselect\\M' AND query ~* '\\mworld\\M' AND query !~* '\\mupdate\\M'), 0)::bigint, \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\mupdate\\M' AND query ~* '\\mworld\\M'), 0)::bigint, \
     coalesce(sum(rows) FILTER (WHERE query ~* '\\mupdate\\M' AND query ~* '\\mworld\\M'), 0)::bigint, \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\mfortune\\M'), 0)::bigint, \
     coalesce(sum(calls) FILTER (WHERE query ~* '\\m(world|fortune)\\M'), 0)::bigint, \
     (extract(epoch FROM coalesce(min(clock_timestamp()), clock_timestamp())) * 1000000)::bigint \
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
            [world_reads, world_updates, rows_updated, fortune_reads, total, at_unix_us] => {
                Ok(Self {
                    world_reads,
                    world_updates,
                    rows_updated,
                    fortune_reads,
                    total,
                    at_unix_us,
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
        let c = container(&RunId("r".into()), "db".into(), &spec(), "net");
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
        let c = StatementCounts::parse("10|2|40|3|15|1700000000000000\n").unwrap();
        assert_eq!(c.rows_updated, 40);
        assert_eq!(c.at_unix_us, 1_700_000_000_000_000);
        let d = StatementCounts::parse("4|1|20|1|6|1").unwrap().since(c);
        assert_eq!(d.world_reads, 6);
        assert!(StatementCounts::parse("1|2").is_err());
        assert_eq!(parse_world_rows("1|5\n7|9\n"), Ok(vec![(1, 5), (7, 9)]));
        assert!(world_rows_sql(&[3, 1]).contains("IN (3,1)"));
    }
}

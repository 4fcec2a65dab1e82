//! The database scenarios on a real daemon.
//!
//! - The database container: built from the `postgres` base without a
//!   registry, seeded (exactly 10,000 world rows, the 12 fortunes),
//!   listening only once seeded, counting statements and the rows the
//!   executor read and wrote, gone with its run. The framework's role is an
//!   ordinary one (no superuser, cannot create functions or temporary
//!   objects, cannot write `fortune`); fairground's own work is taken off
//!   the counters exactly.
//! - Known answer of the counters' flush lag: a backend that flushed less
//!   than a second ago keeps its counts until it has been idle 10 s; read
//!   once settled, the counts are exact.
//! - Known answers through `fairground run`: the reference server (`serve`,
//!   this build's static binary) reads exactly 1 row per `db` request, N per
//!   `queries-N`, the 12 fortunes per page, N reads (and N more for its
//!   UPDATEs' own lookups) and N writes per `updates-N`, and is accepted.
//!   The same server with a known defect (`--db-defect`), each a liar that
//!   breaks one rule and passes the others, is excluded by the check that
//!   names that rule, or rejected under load: a whole-table cache and a
//!   statement that names `world` but reads nothing for `db-rows`; a cache
//!   by id for `db-fresh` (the table changed behind it); numbers never read
//!   for `db-values`; updates never written or rolled back for
//!   `db-persist`; raw fortunes for `body`; a hard-coded fortunes page for
//!   `db-fresh`; a cache that starts only after more requests than
//!   verification sends for the `database work short` rejection.
//!
//! Only traffic: containers on the run's own internal network, and this
//! process's connections to its database.

mod docker_support;

use docker_support::*;
use fairground::contract::db;
use fairground::docker::container::{DatabaseSpec, Resources};
use fairground::docker::database;
use fairground::docker::engine::Engine;

/// The database image, built once per process.
pub fn database_image() -> String {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let e = engine();
        rt().block_on(fairground::docker::bases::ensure(
            e.docker(),
            fairground::docker::bases::DATABASE_BASE,
            e.options(),
        ))
        .unwrap_or_else(|e| panic!("building the database image: {e:#}"))
        .tag
    })
    .clone()
}

fn spec(image: String) -> DatabaseSpec {
    DatabaseSpec {
        image,
        resources: Resources {
            cpuset: None,
            cpus: Some(1.0),
            memory_bytes: Some(512 << 20),
            nofile: Some(4096),
        },
        shared_buffers: 64 << 20,
        max_connections: 50,
        synchronous_commit: false,
        pool: 8,
        readiness_timeout: std::time::Duration::from_secs(60),
        shares_cores_with: None,
    }
}

#[test]
fn the_database_is_seeded_listens_counts_statements_and_leaves_nothing() {
    if !docker_or_skip("database_docker") {
        return;
    }
    let image = database_image();
    let run = test_run("database");
    let e = engine();
    rt().block_on(async {
        let net = e.create_network(&run).await.unwrap();
        let started = database::start(e, &run, format!("{}-db", run.name_prefix()), &spec(image), &net.name)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        eprintln!("database ready after {:?} at {}", started.ready_after, started.ip);
        let h = &started.handle;
        let n = database::query(e, h, "SELECT count(*), min(id), max(id), min(randomnumber) >= 1, max(randomnumber) <= 10000 FROM world")
            .await
            .unwrap();
        assert_eq!(n.trim(), "10000|1|10000|t|t");
        let fortunes = database::query(e, h, "SELECT id, message FROM fortune ORDER BY id").await.unwrap();
        let rows: Vec<&str> = fortunes.lines().collect();
        assert_eq!(rows.len(), db::FORTUNES.len(), "{fortunes}");
        for ((id, msg), line) in db::FORTUNES.iter().zip(&rows) {
            assert_eq!(*line, format!("{id}|{msg}"));
        }
        let before = database::counts(e, h).await.unwrap();
        for id in [1, 2, 3] {
            database::query(e, h, &format!("SELECT randomnumber FROM world WHERE id = {id}"))
                .await
                .unwrap();
        }
        database::query(e, h, "UPDATE world SET randomnumber = 5 WHERE id IN (1,2)").await.unwrap();
        // Each psql's backend flushes its counts as it exits, after psql
        // returned: read them once they have settled.
        let settle = |from: database::StatementCounts, want: (u64, u64)| async move {
            let t = std::time::Instant::now();
            loop {
                let d = from.since(database::counts(e, h).await.unwrap());
                if (d.world_rows_read, d.world_rows_written) == want
                    || t.elapsed() > database::SETTLE_WITHIN
                {
                    return (d, t.elapsed());
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        };
        // 3 rows read by id, 2 more by the UPDATE's own index scan, 2 written.
        let (d, _) = settle(before, (5, 2)).await;
        assert_eq!((d.world_reads, d.world_updates, d.rows_updated), (3, 1, 2), "{d:?}");
        assert_eq!((d.world_rows_read, d.world_rows_written), (5, 2), "{d:?}");
        let (rows, own) = database::world_rows(e, h, &[1, 2]).await.unwrap();
        assert_eq!(rows.get(&1), Some(&5));
        assert_eq!(own.world_rows_read, 2, "{own:?}");

        // fairground's own change: every row to a number it did not hold,
        // its work counted before it committed and flushed at once.
        let all: Vec<u32> = (1..=db::WORLD_ROWS).collect();
        let (old, _) = database::world_rows(e, h, &all).await.unwrap();
        let at = database::counts(e, h).await.unwrap();
        let (_, own) = database::own_work(e, h, database::CHANGE_WORLD_SQL).await.unwrap();
        assert_eq!((own.world_rows_read, own.world_rows_written), (10_000, 10_000), "{own:?}");
        let d = at.since(database::counts(e, h).await.unwrap());
        assert_eq!((d.world_rows_read, d.world_rows_written), (10_000, 10_000), "flushed at once: {d:?}");
        let (new, _) = database::world_rows(e, h, &all).await.unwrap();
        assert_eq!(new.len(), 10_000);
        assert!(new.iter().all(|(id, n)| old.get(id) != Some(n) && (1..=10_000).contains(n)));

        // The framework's role: ordinary, and its counts lag.
        let client = framework_client(&started.ip).await;
        let q = |sql: &'static str| {
            let client = &client;
            async move { client.batch_execute(sql).await }
        };
        for forbidden in [
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE TEMP TABLE t (x int)",
            "INSERT INTO fortune VALUES (99, 'x')",
            "CREATE TABLE public.t (x int)",
        ] {
            let err = q(forbidden).await.expect_err(forbidden);
            assert!(err.to_string().contains("permission denied") || format!("{err:?}").contains("permission denied"), "{forbidden}: {err:?}");
        }
        let row = client
            .query_one("SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user", &[])
            .await
            .unwrap();
        assert_eq!((row.get::<_, bool>(0), row.get::<_, bool>(1), row.get::<_, bool>(2)), (false, false, false));
        // Flush lag: the first SELECT flushes at once (no flush before it),
        // the next three within a second of it stay in the backend until it
        // has been idle PGSTAT_IDLE_INTERVAL (10 s).
        let at = database::counts(e, h).await.unwrap();
        let stmt = client.prepare("SELECT id, randomnumber FROM world WHERE id = $1").await.unwrap();
        let t0 = std::time::Instant::now();
        for id in [11, 12, 13, 14] {
            client.query_one(&stmt, &[&id]).await.unwrap();
        }
        let fast = t0.elapsed();
        let at_once = at.since(database::counts(e, h).await.unwrap());
        let (settled, after) = settle(at, (4, 0)).await;
        eprintln!(
            "flush lag known answer: 4 rows read in {fast:?}; counted at once {}, settled {} after {after:?}",
            at_once.world_rows_read, settled.world_rows_read
        );
        assert_eq!(settled.world_rows_read, 4, "{settled:?}");
        assert!(after < database::SETTLE_WITHIN, "{after:?}");
        if fast < std::time::Duration::from_millis(500) {
            // Only on a host that ran the four within half a second can the
            // lag be asserted: it is 1 with them all pending.
            assert!(at_once.world_rows_read < 4, "{at_once:?}");
        }
        e.cleanup(&run).await.unwrap();
    });
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));
}

/// A connection as the framework's role, as a framework would open one.
async fn framework_client(ip: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(
        &format!(
            "host={ip} port={} dbname={} user={} password={}",
            db::DB_PORT,
            db::DB_NAME,
            db::DB_USER,
            db::DB_PASSWORD
        ),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap_or_else(|e| panic!("connecting as {}: {e}", db::DB_USER));
    tokio::spawn(connection);
    client
}

/// A framework `name` under `dir/frameworks` that is the reference server
/// (this build's static binary) with the database scenarios, `defect`
/// (a `--db-defect` value) if any.
fn refdb(dir: &std::path::Path, name: &str, scenarios: &str, defect: Option<&str>) {
    refdb_env(dir, name, scenarios, defect, &[]);
}

/// [`refdb`] with more environment variables.
fn refdb_env(
    dir: &std::path::Path,
    name: &str,
    scenarios: &str,
    defect: Option<&str>,
    env: &[(&str, &str)],
) {
    let d = dir.join("frameworks").join(name);
    std::fs::create_dir_all(&d).unwrap();
    let bin = std::env::var_os("FAIRGROUND_STATIC_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            fairground::docker::images::locate_static_binary(&root()).expect("make static")
        });
    std::fs::copy(bin, d.join("app")).unwrap();
    std::fs::write(d.join("versions.txt"), "fairground serve (this build)\n").unwrap();
    std::fs::write(
        d.join("Dockerfile"),
        "ARG BASE=scratch\nFROM ${BASE}\nCOPY app /app\nCOPY versions.txt /fairground/versions.txt\n\
         USER 65534:65534\nENTRYPOINT [\"/app\", \"serve\", \"--bind\", \"0.0.0.0\", \"--port\", \"8080\", \
         \"--threads\", \"1\"]\n",
    )
    .unwrap();
    let mut manifest = format!(
        "name: {name}\nlanguage: rust\nframework: fairground serve (reference server, test fixture)\n\
         base: scratch\nscenarios: [{scenarios}]\n\
         workers: one thread\nnotes: test fixture; never benchmarked\n"
    );
    if defect.is_some() || !env.is_empty() {
        manifest.push_str("env:\n");
    }
    if let Some(d) = defect {
        manifest.push_str(&format!("  FAIRGROUND_SERVE_DB_DEFECT: \"{d}\"\n"));
    }
    for (k, v) in env {
        manifest.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    std::fs::write(d.join("framework.yaml"), manifest).unwrap();
}

/// Requests after which the `late-cache` liar turns into a cache: above the
/// about 830 `/db` requests verification sends, below what the run's warm-up
/// sends.
const LATE_CACHE_AFTER: &str = "2000";

#[test]
fn the_reference_server_does_exactly_its_work_and_each_liar_is_caught_by_its_rule() {
    if !docker_or_skip("database_docker") {
        return;
    }
    database_image();
    let tmp = tempfile::tempdir().unwrap().keep();
    refdb(&tmp, "refdb", "db, queries, fortunes, updates", None);
    refdb(&tmp, "caches", "db", Some("cache"));
    refdb(&tmp, "fakes", "db, queries", Some("fake-values"));
    refdb(&tmp, "forgets", "updates", Some("no-persist"));
    refdb(&tmp, "rawhtml", "fortunes", Some("raw-fortunes"));
    refdb(&tmp, "byid", "db, queries", Some("by-id-cache"));
    refdb(&tmp, "cheap", "db, queries", Some("cheap-statement"));
    refdb(&tmp, "fakefort", "fortunes", Some("fake-fortunes"));
    refdb(&tmp, "rollback", "updates", Some("rolled-back"));
    refdb(&tmp, "writeonly", "updates", Some("write-only"));
    refdb_env(
        &tmp,
        "late",
        "db",
        Some("late-cache"),
        &[("FAIRGROUND_SERVE_DB_CACHE_AFTER", LATE_CACHE_AFTER)],
    );
    let profile = "description: \"database known answers\"\n\
         frameworks: [refdb, caches, fakes, forgets, rawhtml, byid, cheap, fakefort, rollback, writeonly, late]\n\
         scenarios: [db, queries-20, fortunes, updates-5]\nconcurrency: [4]\n\
         warmup: 1s\nduration: 2s\nrounds: 1\n\
         load: {threads: 1, timeout: 2s}\n\
         server: {cpus: 1, memory: 256MiB, nofile: 4096}\n\
         loader: {cpus: 1, memory: 256MiB, nofile: 4096}\n\
         database: {cpus: 1, memory: 512MiB, shared_buffers: 64MiB, pool: 4, max_connections: 20}\n\
         idle_settle: 1s\nreadiness_timeout: 60s\nthresholds: {preflight: warn}\n";
    let (r, stderr) = run_profile_in(&tmp, profile);
    for c in &r.cells {
        let round = c.rounds.first();
        let db = round.and_then(|x| x.database.as_ref());
        let work = db.and_then(|d| d.work.as_ref());
        eprintln!(
            "database known answer {:8} {:11} {:>9} req/s, {:>6} queries/req, rows/req read {:>7} written {:>6} (need {} / {}, settled after {}), db {:>7} µs/req, {:?}: {:?}",
            c.key.framework,
            c.key.scenario.to_string(),
            round.map_or("-".into(), |x| format!("{:.1}", x.throughput_rps)),
            db.and_then(|d| d.queries_per_request).map_or("-".into(), |q| format!("{q:.3}")),
            work.and_then(|w| w.rows_read_per_request).map_or("-".into(), |q| format!("{q:.3}")),
            work.and_then(|w| w.rows_written_per_request).map_or("-".into(), |q| format!("{q:.3}")),
            work.map_or("-".into(), |w| format!("{:.2}", w.rows_read_required)),
            work.and_then(|w| w.rows_written_required).map_or("-".into(), |q| format!("{q:.3}")),
            work.map_or("-".into(), |w| format!("{:.2} s", w.settled_after_s)),
            db.and_then(|d| d.cpu_us_per_request).map_or("-".into(), |q| format!("{q:.0}")),
            c.verdict.status,
            c.verdict.reasons.iter().map(|r| r.to_string()).collect::<Vec<_>>()
        );
    }
    let cell = |fw: &str, sc: &str| {
        r.cells
            .iter()
            .find(|c| c.key.framework == fw && c.key.scenario.to_string() == sc)
            .unwrap_or_else(|| panic!("no {fw} {sc} cell\n{stderr}"))
    };
    // refdb: accepted, with the database's figures; rows read per response
    // as asked (1, 20, the 12 fortunes, 5 SELECTs + 5 UPDATE lookups and 5
    // written), never below and above only by the requests in flight at the
    // window's edges and the counts pending as it opened; statements as
    // asked (1, 20, 1, 5 reads + 5 updates).
    for (sc, per, rows, written) in [
        ("db", 1.0, 1.0, None),
        ("queries-20", 20.0, 20.0, None),
        ("fortunes", 1.0, 12.0, None),
        // 5 SELECTs and the UPDATEs' own lookups of the 5 rows they write.
        ("updates-5", 10.0, 10.0, Some(5.0)),
    ] {
        let c = cell("refdb", sc);
        assert_ne!(
            c.verdict.status,
            fairground::results::Status::Rejected,
            "{sc}: {:?}\n{stderr}",
            c.verdict
        );
        let round = c.rounds.first().expect("measured");
        let db = round.database.as_ref().expect("database figures");
        let q = db.queries_per_request.expect("queries counted");
        // The second figure, read at the window's edges over a connection
        // of the lab's own: a busy host delays the closing read by a few
        // requests' statements (10.28 for 10 on CI's kind of machine with
        // the suite running), which is why the gate judges rows instead.
        assert!(
            (q - per).abs() / per < 0.05,
            "refdb {sc}: {q} queries per request, expected {per}"
        );
        let work = db.work.as_ref().expect("rows counted");
        let read = work.rows_read_per_request.expect("rows per request");
        // Counting stops once the need less the gate's 2% is met.
        assert!(
            (work.rows_read_required - rows).abs() < 0.01,
            "refdb {sc}: needs {} rows read, expected {rows}",
            work.rows_read_required
        );
        assert!(
            read >= work.rows_read_required * 0.98 - 1e-9 && read < rows * 2.5,
            "refdb {sc}: {read} rows read per request, expected {rows}: {work:?}"
        );
        if let Some(w) = written {
            let got = work.rows_written_per_request.expect("rows written");
            assert!(
                got >= w * 0.98 && got < w * 1.5,
                "refdb {sc}: {got} rows written per request, expected {w}: {work:?}"
            );
        }
        assert!(db.cpu_us_per_request.is_some_and(|c| c > 0.0), "{db:?}");
        assert_eq!(db.shares_cores_with.as_deref(), Some("the server"));
        // After the load the table changed and the answers followed
        // (updates change it themselves: persistence is their check).
        match (sc, &db.table_change) {
            ("updates-5", None) => {}
            (_, Some(c)) => assert!(c.followed, "refdb {sc}: {c:?}"),
            (_, None) => panic!("refdb {sc}: no table-change check"),
        }
    }
    // Each liar excluded by the check that names its rule.
    let facts = |fw: &str| {
        r.frameworks
            .iter()
            .find(|f| f.name == fw)
            .and_then(|f| f.verify.clone())
            .unwrap_or_else(|| panic!("{fw} was not verified\n{stderr}"))
    };
    // Liars declaring `db` and `queries` meet in `queries-20` the table
    // fairground changed during `db`'s checks: a copy taken before answers
    // the old numbers there (`db-values`, the rule that answers follow the
    // table).
    let stale = ("db-values", "not what the table holds");
    let cached = ("db-rows", "a cache or a fake");
    for (fw, sc, rules) in [
        ("caches", "db", vec![cached]),
        ("fakes", "db", vec![stale]),
        ("fakes", "queries-20", vec![stale]),
        (
            "forgets",
            "updates-5",
            vec![("db-persist", "do not persist")],
        ),
        (
            "rollback",
            "updates-5",
            vec![("db-persist", "do not persist")],
        ),
        (
            "writeonly",
            "updates-5",
            vec![("db-rows", "rows of world read")],
        ),
        ("rawhtml", "fortunes", vec![("body", "not escaped")]),
        (
            "byid",
            "db",
            vec![cached, ("db-fresh", "changed every row")],
        ),
        ("byid", "queries-20", vec![stale, cached]),
        ("cheap", "db", vec![("db-rows", "rows of world read: 0")]),
        ("cheap", "queries-20", vec![stale]),
        (
            "fakefort",
            "fortunes",
            vec![("db-rows", "rows of fortune read: 0")],
        ),
    ] {
        let v = facts(fw);
        let e = v
            .excluded
            .iter()
            .find(|e| e.scenario.to_string() == sc)
            .unwrap_or_else(|| panic!("{fw} {sc} was not excluded: {v:?}"));
        assert!(
            rules
                .iter()
                .any(|(check, says)| e.reason.contains(check) && e.reason.contains(says)),
            "{fw} {sc}: {}",
            e.reason
        );
        assert_eq!(
            cell(fw, sc).verdict.status,
            fairground::results::Status::Rejected
        );
    }
    // The late cache passes verification and is rejected under load for
    // the rows it did not read.
    let v = facts("late");
    assert!(v.excluded.is_empty(), "late: {v:?}");
    let late = cell("late", "db");
    assert_eq!(
        late.verdict.status,
        fairground::results::Status::Rejected,
        "{:?}",
        late.verdict
    );
    let why = late
        .verdict
        .reasons
        .iter()
        .map(|r| r.to_string())
        .find(|r| r.contains("rows of world per 2xx response"))
        .unwrap_or_else(|| panic!("late: {:?}", late.verdict));
    assert!(why.contains("needs 1.00"), "{why}");
    // And, the load over, its answers did not follow the changed table.
    let stale = late
        .verdict
        .reasons
        .iter()
        .map(|r| r.to_string())
        .find(|r| r.contains("answers did not follow the table"))
        .unwrap_or_else(|| panic!("late: {:?}", late.verdict));
    assert!(stale.contains("held the old numbers"), "{stale}");
    assert!(
        run_leftovers(&stderr).is_empty(),
        "{}",
        run_leftovers(&stderr)
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

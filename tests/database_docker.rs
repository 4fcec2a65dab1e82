//! The database scenarios on a real daemon.
//!
//! - The database container: built from the `postgres` base without a
//!   registry, seeded (exactly 10,000 world rows, the 12 fortunes),
//!   listening only once seeded, counting statements, gone with its run.
//! - Known answers through `fairground run`: the reference server (`serve`,
//!   this build's static binary) asks exactly 1 query per `db` request, N
//!   per `queries-N`, 1 per `fortunes`, N reads and N single-row updates
//!   per `updates-N`; PostgreSQL's own counts over each window say so to
//!   within the requests in flight at its edges, and verification's bursts
//!   exactly. The same server with a known defect (`--db-defect`) is
//!   excluded for it: a cache for too few queries, numbers it never read
//!   for wrong values, updates never written for not persisting, raw
//!   fortunes for the unescaped `<script>`.
//!
//! Only traffic: containers on the run's own internal network.

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
        let d = before.since(database::counts(e, h).await.unwrap());
        assert_eq!((d.world_reads, d.world_updates, d.rows_updated), (3, 1, 2), "{d:?}");
        let rows = database::world_rows(e, h, &[1, 2]).await.unwrap();
        assert_eq!(rows.get(&1), Some(&5));
        e.cleanup(&run).await.unwrap();
    });
    assert!(leftovers(&run).is_empty(), "{:?}", leftovers(&run));
}

/// A framework `name` under `dir/frameworks` that is the reference server
/// (this build's static binary) with the database scenarios, `defect`
/// (a `--db-defect` value) if any.
fn refdb(dir: &std::path::Path, name: &str, scenarios: &str, defect: Option<&str>) {
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
    if let Some(d) = defect {
        manifest.push_str(&format!("env:\n  FAIRGROUND_SERVE_DB_DEFECT: \"{d}\"\n"));
    }
    std::fs::write(d.join("framework.yaml"), manifest).unwrap();
}

#[test]
fn the_reference_server_asks_exactly_its_queries_and_each_defect_is_excluded() {
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
    let profile = "description: \"database known answers\"\n\
         frameworks: [refdb, caches, fakes, forgets, rawhtml]\n\
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
        eprintln!(
            "database known answer {:8} {:11} {:>9} req/s, {:>6} queries/req, db {:>7} µs/req, db mem {:?}, {:?}: {:?}",
            c.key.framework,
            c.key.scenario.to_string(),
            round.map_or("-".into(), |x| format!("{:.1}", x.throughput_rps)),
            db.and_then(|d| d.queries_per_request).map_or("-".into(), |q| format!("{q:.3}")),
            db.and_then(|d| d.cpu_us_per_request).map_or("-".into(), |q| format!("{q:.0}")),
            db.and_then(|d| d.memory_median_bytes),
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
    // refdb: measured, with the database's figures; queries per request as
    // asked (1, 20, 1, 5 reads + 5 updates), within the requests in flight
    // at the window's edges.
    for (sc, per) in [
        ("db", 1.0),
        ("queries-20", 20.0),
        ("fortunes", 1.0),
        ("updates-5", 10.0),
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
        assert!(
            (q - per).abs() / per < 0.02,
            "refdb {sc}: {q} queries per request, expected {per}"
        );
        assert!(db.cpu_us_per_request.is_some_and(|c| c > 0.0), "{db:?}");
        assert!(
            db.memory_median_bytes.is_some_and(|m| m > 1 << 20),
            "{db:?}"
        );
        assert_eq!(db.shares_cores_with.as_deref(), Some("the server"));
        if sc == "updates-5" {
            let st = db.statements.unwrap();
            assert!(
                (st.rows_updated as f64 / st.world_reads as f64 - 1.0).abs() < 0.02,
                "{st:?}"
            );
        }
    }
    // Each defect excluded by the check that catches it.
    let facts = |fw: &str| {
        r.frameworks
            .iter()
            .find(|f| f.name == fw)
            .and_then(|f| f.verify.clone())
            .unwrap_or_else(|| panic!("{fw} was not verified\n{stderr}"))
    };
    for (fw, sc, check, says) in [
        ("caches", "db", "db-queries", "a cache or a fake"),
        ("fakes", "db", "db-values", "not what the table holds"),
        (
            "fakes",
            "queries-20",
            "db-values",
            "not what the table holds",
        ),
        ("forgets", "updates-5", "db-persist", "do not persist"),
        ("rawhtml", "fortunes", "body", "not escaped"),
    ] {
        let v = facts(fw);
        let e = v
            .excluded
            .iter()
            .find(|e| e.scenario.to_string() == sc)
            .unwrap_or_else(|| panic!("{fw} {sc} was not excluded: {v:?}"));
        assert!(
            e.reason.contains(check) && e.reason.contains(says),
            "{fw} {sc}: {}",
            e.reason
        );
        assert_eq!(
            cell(fw, sc).verdict.status,
            fairground::results::Status::Rejected
        );
    }
    assert!(
        run_leftovers(&stderr).is_empty(),
        "{}",
        run_leftovers(&stderr)
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

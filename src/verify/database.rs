//! The database scenarios checked against the database itself, beyond what
//! TechEmpower checked: the values returned are the values stored, the
//! queries were really issued (`pg_stat_statements`), and updates persist.
//!
//! Each database scenario whose answers passed the shape checks gets one
//! burst of [`BURST`] requests on a keep-alive connection, with the
//! statement counts read before and after it, and then:
//! - `db-values` (db, queries-N): every row returned holds the stored
//!   number of its id;
//! - `db-persist` (updates-N): at least [`PERSIST_SHARE`] of the ids the
//!   burst touched now hold a number a response returned for them;
//! - `db-queries`: at least one `world` read per row asked (`db` 1,
//!   `queries-N` and `updates-N` N per request), one `fortune` read per
//!   fortunes request, and for updates one updated row per distinct id of
//!   each request (one batched UPDATE per request is allowed, and said).
//!   Fewer is a cache or a fake.

use std::collections::{BTreeMap, BTreeSet};

use crate::contract::{self, db, Request, Scenario};
use crate::docker::database::{self as pg, StatementCounts};
use crate::docker::engine::{Engine, Handle};

use super::report::{names, ContractCheck, VerifyReport};
use super::{Endpoint, Session, VerifyOptions};

/// Requests of each scenario's burst.
pub const BURST: u32 = 20;
/// Share of the ids an updates burst touched that must hold a returned
/// number afterwards (concurrent writers to one id may each win).
pub const PERSIST_SHARE: f64 = 0.95;

/// Somewhere to ask the database of the server under test.
#[allow(async_fn_in_trait)] // used in one task; no Send bound needed
pub trait DatabaseAccess {
    /// Statement counts so far.
    async fn counts(&self) -> anyhow::Result<StatementCounts>;
    /// The stored number of each of `ids`.
    async fn stored(&self, ids: &[u32]) -> anyhow::Result<BTreeMap<u32, u32>>;
}

/// The database container `handle` of a run, asked through `engine`.
pub struct ContainerDatabase<'a, E: Engine> {
    /// The engine it runs on.
    pub engine: &'a E,
    /// Its container.
    pub handle: &'a Handle,
}

impl<E: Engine> DatabaseAccess for ContainerDatabase<'_, E> {
    async fn counts(&self) -> anyhow::Result<StatementCounts> {
        pg::counts(self.engine, self.handle).await
    }

    async fn stored(&self, ids: &[u32]) -> anyhow::Result<BTreeMap<u32, u32>> {
        pg::world_rows(self.engine, self.handle, ids).await
    }
}

/// Add the database checks of every database scenario of `report` that
/// passed its own checks so far, then settle the report again.
pub async fn check_report(
    report: &mut VerifyReport,
    options: &VerifyOptions,
    database: &impl DatabaseAccess,
) {
    // A server that never started (or a connection check that excludes
    // everything) has nothing to ask the database about.
    if report.checks.iter().any(ContractCheck::excludes) {
        return;
    }
    let target = match Endpoint::resolve(
        &report.url,
        options.protocol,
        options.tls.as_ref(),
        options.timeout,
    )
    .await
    {
        Ok(t) => t,
        Err(_) => return,
    };
    for s in &mut report.scenarios {
        if !s.scenario.needs_database() || s.checks.iter().any(ContractCheck::excludes) {
            continue;
        }
        let checks = check(&target, s.scenario, database).await;
        s.checks.extend(checks);
    }
    report.finish();
}

/// The database checks of one scenario.
pub async fn check(
    target: &Endpoint,
    scenario: Scenario,
    database: &impl DatabaseAccess,
) -> Vec<ContractCheck> {
    let burst = match run_burst(target, scenario, database).await {
        Ok(b) => b,
        Err(e) => return vec![ContractCheck::required(names::DB_QUERIES, Err(e))],
    };
    let mut checks = Vec::new();
    match scenario {
        Scenario::Db | Scenario::Queries(_) => {
            checks.push(ContractCheck::required(
                names::DB_VALUES,
                values_true(&burst, database).await,
            ));
        }
        Scenario::Updates(_) => {
            checks.push(ContractCheck::required(
                names::DB_PERSIST,
                persisted(&burst, database).await,
            ));
        }
        _ => {}
    }
    checks.push(ContractCheck::required(
        names::DB_QUERIES,
        queries_issued(scenario, &burst),
    ));
    checks
}

/// What one burst returned and caused.
struct Burst {
    /// Rows of each answer (empty for fortunes).
    answers: Vec<Vec<(u32, u32)>>,
    /// Statements between its start and end.
    counts: StatementCounts,
}

async fn run_burst(
    target: &Endpoint,
    scenario: Scenario,
    database: &impl DatabaseAccess,
) -> Result<Burst, String> {
    let before = database
        .counts()
        .await
        .map_err(|e| format!("cannot read pg_stat_statements: {e:#}"))?;
    let mut session = Session::new(target);
    let mut rng = rand::rng();
    let mut answers = Vec::new();
    for i in 0..BURST {
        let req: Request = contract::sample_request(scenario, &mut rng);
        let label = format!("{} {} ({} of {BURST})", req.method, req.path, i + 1);
        let resp = session
            .request(&req)
            .await
            .map_err(|e| format!("{label}: {e}"))?;
        super::scenario::judge(scenario, &req, &resp).map_err(|e| format!("{label}: {e}"))?;
        answers.push(match scenario {
            Scenario::Fortunes => Vec::new(),
            Scenario::Db => db::check_world(&resp.body, None)?,
            _ => db::check_world(&resp.body, Some(db::count_in_path(&req.path)))?,
        });
    }
    let after = database
        .counts()
        .await
        .map_err(|e| format!("cannot read pg_stat_statements: {e:#}"))?;
    Ok(Burst {
        answers,
        counts: before.since(after),
    })
}

async fn values_true(burst: &Burst, database: &impl DatabaseAccess) -> Result<String, String> {
    let rows: Vec<(u32, u32)> = burst.answers.iter().flatten().copied().collect();
    let ids: Vec<u32> = rows
        .iter()
        .map(|r| r.0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let stored = database
        .stored(&ids)
        .await
        .map_err(|e| format!("cannot read the world table: {e:#}"))?;
    let wrong: Vec<String> = rows
        .iter()
        .filter(|(id, n)| stored.get(id) != Some(n))
        .map(|(id, n)| match stored.get(id) {
            Some(s) => format!("id {id} returned {n}, stored {s}"),
            None => format!("id {id} returned {n}, no such row"),
        })
        .collect();
    if wrong.is_empty() {
        Ok(format!(
            "{} rows returned, each the stored number of its id",
            rows.len()
        ))
    } else {
        Err(format!(
            "{} of {} rows returned are not what the table holds: {}",
            wrong.len(),
            rows.len(),
            wrong.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
        ))
    }
}

async fn persisted(burst: &Burst, database: &impl DatabaseAccess) -> Result<String, String> {
    let mut returned: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (id, n) in burst.answers.iter().flatten() {
        returned.entry(*id).or_default().insert(*n);
    }
    let ids: Vec<u32> = returned.keys().copied().collect();
    let stored = database
        .stored(&ids)
        .await
        .map_err(|e| format!("cannot read the world table: {e:#}"))?;
    let kept = returned
        .iter()
        .filter(|(id, ns)| stored.get(id).is_some_and(|s| ns.contains(s)))
        .count();
    let share = kept as f64 / ids.len().max(1) as f64;
    let text = format!(
        "{kept} of the {} ids the burst updated hold a number it returned ({:.0}%; at least {:.0}% must)",
        ids.len(),
        share * 100.0,
        PERSIST_SHARE * 100.0
    );
    if share >= PERSIST_SHARE {
        Ok(text)
    } else {
        Err(format!("updates do not persist: {text}"))
    }
}

fn queries_issued(scenario: Scenario, burst: &Burst) -> Result<String, String> {
    let c = burst.counts;
    let requests = burst.answers.len() as u64;
    let rows: u64 = burst.answers.iter().map(|a| a.len() as u64).sum();
    let per = |n: u64| n as f64 / requests.max(1) as f64;
    let shown = format!(
        "{requests} requests caused {} world reads, {} world updates ({} rows), {} fortune reads",
        c.world_reads, c.world_updates, c.rows_updated, c.fortune_reads
    );
    let short = |what: &str, got: u64, need: u64| {
        Err(format!(
            "too few queries for the answers given ({what}: {got}, at least {need} needed, {:.2} per request): a cache or a fake; {shown}",
            per(got)
        ))
    };
    match scenario {
        Scenario::Fortunes => {
            if c.fortune_reads < requests {
                return short("fortune reads", c.fortune_reads, requests);
            }
            Ok(format!("{shown} ({:.2} per request)", per(c.fortune_reads)))
        }
        Scenario::Updates(_) => {
            if c.world_reads < rows {
                return short("world reads", c.world_reads, rows);
            }
            let distinct: u64 = burst
                .answers
                .iter()
                .map(|a| a.iter().map(|r| r.0).collect::<BTreeSet<_>>().len() as u64)
                .sum();
            if c.rows_updated < distinct {
                return short("rows updated", c.rows_updated, distinct);
            }
            let batched = if c.world_updates < c.rows_updated {
                format!(
                    "; batched: {:.2} UPDATE statements per request",
                    per(c.world_updates)
                )
            } else {
                String::new()
            };
            Ok(format!("{shown}{batched}"))
        }
        _ => {
            if c.world_reads < rows {
                return short("world reads", c.world_reads, rows);
            }
            Ok(format!(
                "{shown} ({:.2} reads per request)",
                per(c.world_reads)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burst(answers: Vec<Vec<(u32, u32)>>, counts: StatementCounts) -> Burst {
        Burst { answers, counts }
    }

    #[test]
    fn too_few_reads_is_a_cache() {
        let rows = vec![vec![(1, 2)]; 20];
        let honest = StatementCounts {
            world_reads: 20,
            total: 20,
            ..Default::default()
        };
        assert!(queries_issued(Scenario::Db, &burst(rows.clone(), honest)).is_ok());
        let cached = StatementCounts {
            world_reads: 1,
            total: 1,
            ..Default::default()
        };
        let e = queries_issued(Scenario::Db, &burst(rows, cached)).unwrap_err();
        assert!(
            e.contains("a cache or a fake") && e.contains("world reads: 1, at least 20"),
            "{e}"
        );
    }

    #[test]
    fn batched_updates_pass_and_are_said_and_missing_writes_fail() {
        let answers = vec![vec![(1, 5), (2, 6), (2, 7)]; 2];
        let batched = StatementCounts {
            world_reads: 6,
            world_updates: 2,
            rows_updated: 4,
            ..Default::default()
        };
        let ok = queries_issued(Scenario::Updates(3), &burst(answers.clone(), batched)).unwrap();
        assert!(
            ok.contains("batched: 1.00 UPDATE statements per request"),
            "{ok}"
        );
        let unwritten = StatementCounts {
            world_reads: 6,
            ..Default::default()
        };
        assert!(
            queries_issued(Scenario::Updates(3), &burst(answers, unwritten))
                .unwrap_err()
                .contains("rows updated: 0, at least 4")
        );
    }
}

//! The database scenarios checked against the database itself, beyond what
//! TechEmpower checked: the values returned are the values stored, also
//! after fairground changed them behind the server's back; the executor
//! really read (and wrote) the rows the answers stand for; and updates
//! persist.
//!
//! Work is counted by the tables' own row counters (`pg_stat_user_tables`:
//! rows read by sequential and index scans, rows updated), not by the text
//! of statements: a statement that names `world` and reads nothing counts
//! nothing. The counters reach shared memory late (see
//! [`crate::docker::database`]), so each burst's count is read once it has
//! settled: as soon as it reaches what the answers need, or after
//! [`pg::SETTLE_WITHIN`] (the longest a backend keeps them) when it never
//! does.
//!
//! Each database scenario whose answers passed the shape checks gets:
//! - `db`, `queries-N`: a burst of [`CONNECTIONS`] concurrent connections
//!   (about [`READ_ROWS`] rows, so a cache by id meets repeated ids), then
//!   every row of `world` changed to a number it did not hold, then a second
//!   burst. `db-values`: the first burst's rows hold the stored numbers;
//!   `db-fresh`: the second burst's hold the new ones (a cache answers the
//!   old); `db-rows`: the executor read at least one row of `world` per row
//!   answered, in each burst.
//! - `fortunes`: a burst; a row with markup added to `fortune`; a second
//!   burst whose every page must show it, escaped (`db-fresh`); the row
//!   taken away again. `db-rows`: every page cost one read of the whole
//!   table (its rows at the time).
//! - `updates-N`: a sequential burst on one connection, after which every id
//!   it touched holds the number the last request touching it returned (0
//!   lost: nothing can explain a lost write); then a concurrent burst after
//!   which every id touched holds one of the numbers returned for it
//!   (`db-persist`). `db-rows`: at least N rows of `world` read and one row
//!   updated per distinct id of each request.
//! - `db-queries` (statements counted by `pg_stat_statements`, the second
//!   figure): at least one statement reading `world` per row answered (one
//!   `= ANY` statement for N rows breaks the scenario's rule), one reading
//!   `fortune` per page.

use std::collections::{BTreeMap, BTreeSet};

use crate::contract::{self, db, Request, Scenario};
use crate::docker::database::{self as pg, OwnWork, StatementCounts};
use crate::docker::engine::{Engine, Handle};

use super::report::{names, ContractCheck, VerifyReport};
use super::{Endpoint, Session, VerifyOptions};

/// Connections of each concurrent burst.
pub const CONNECTIONS: u32 = 4;
/// Rows a `db` or `queries-N` burst asks for (at least [`MIN_REQUESTS`]
/// requests): two bursts of 400 random ids out of 10,000 share about 16,
/// and one burst repeats about 8 of its own, so a cache by id is met.
pub const READ_ROWS: u32 = 400;
/// Fewest requests of a burst.
pub const MIN_REQUESTS: u32 = 20;
/// Requests of a fortunes burst.
pub const FORTUNES_REQUESTS: u32 = 40;
/// Requests of the concurrent updates burst.
pub const UPDATES_REQUESTS: u32 = 40;
/// Connections of a nudge (one request each) while a concurrent burst's
/// counts settle: as many as the database's pool, so most of its
/// connections serve one.
const NUDGE_CONNECTIONS: u32 = 16;

/// Somewhere to ask the database of the server under test.
#[allow(async_fn_in_trait)] // used in one task; no Send bound needed
pub trait DatabaseAccess {
    /// Work and statement counts so far, fairground's own work left out.
    async fn counts(&self) -> anyhow::Result<StatementCounts>;
    /// The stored number of each of `ids`.
    async fn stored(&self, ids: &[u32]) -> anyhow::Result<BTreeMap<u32, u32>>;
    /// Run `sql` as fairground's own change of the tables.
    async fn change(&self, sql: &str) -> anyhow::Result<()>;
}

/// The database container `handle` of a run, asked through `engine`.
pub struct ContainerDatabase<'a, E: Engine> {
    engine: &'a E,
    handle: &'a Handle,
    /// fairground's own work in the tables so far.
    own: std::sync::Mutex<OwnWork>,
}

impl<'a, E: Engine> ContainerDatabase<'a, E> {
    /// The database in container `handle`, asked through `engine`.
    pub fn new(engine: &'a E, handle: &'a Handle) -> Self {
        ContainerDatabase {
            engine,
            handle,
            own: std::sync::Mutex::new(OwnWork::default()),
        }
    }

    fn add_own(&self, work: OwnWork) {
        let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        *own = own.plus(work);
    }
}

impl<E: Engine> DatabaseAccess for ContainerDatabase<'_, E> {
    async fn counts(&self) -> anyhow::Result<StatementCounts> {
        let c = pg::counts(self.engine, self.handle).await?;
        let own = *self.own.lock().unwrap_or_else(|e| e.into_inner());
        Ok(c.without(own))
    }

    async fn stored(&self, ids: &[u32]) -> anyhow::Result<BTreeMap<u32, u32>> {
        let (rows, work) = pg::world_rows(self.engine, self.handle, ids).await?;
        self.add_own(work);
        Ok(rows)
    }

    async fn change(&self, sql: &str) -> anyhow::Result<()> {
        let (_, work) = pg::own_work(self.engine, self.handle, sql).await?;
        self.add_own(work);
        Ok(())
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
    match checks(target, scenario, database).await {
        Ok(c) => c,
        Err(e) => vec![ContractCheck::required(names::DB_ROWS, Err(e))],
    }
}

async fn checks(
    target: &Endpoint,
    scenario: Scenario,
    database: &impl DatabaseAccess,
) -> Result<Vec<ContractCheck>, String> {
    let mut out = Vec::new();
    match scenario {
        Scenario::Db | Scenario::Queries(_) => {
            let rows_each = match scenario {
                Scenario::Queries(n) => u32::from(db::queries_count(Some(&n.to_string()))),
                _ => 1,
            };
            let requests = (READ_ROWS / rows_each).max(MIN_REQUESTS);
            let first = run_burst(target, scenario, database, requests, CONNECTIONS, None).await?;
            out.push(ContractCheck::required(
                names::DB_VALUES,
                values_true(&first, database, "").await,
            ));
            database
                .change(pg::CHANGE_WORLD_SQL)
                .await
                .map_err(|e| format!("cannot change the world table: {e:#}"))?;
            let second = run_burst(target, scenario, database, requests, CONNECTIONS, None).await?;
            out.push(ContractCheck::required(
                names::DB_ROWS,
                rows_read(scenario, &first).and_then(|a| {
                    rows_read(scenario, &second).map(|b| format!("{a}; after the change, {b}"))
                }),
            ));
            out.push(ContractCheck::required(
                names::DB_FRESH,
                values_true(
                    &second,
                    database,
                    "after fairground changed every row of world (a cache answers the old number): ",
                )
                .await,
            ));
            out.push(ContractCheck::required(
                names::DB_QUERIES,
                queries_issued(scenario, &first.merged(&second)),
            ));
        }
        Scenario::Fortunes => {
            let first = run_burst(
                target,
                scenario,
                database,
                FORTUNES_REQUESTS,
                CONNECTIONS,
                None,
            )
            .await?;
            database
                .change(&pg::add_fortune_sql())
                .await
                .map_err(|e| format!("cannot add a fortune: {e:#}"))?;
            let added = (pg::ADDED_ROW_ID, pg::ADDED_ROW_MESSAGE);
            let second = run_burst(
                target,
                scenario,
                database,
                FORTUNES_REQUESTS,
                CONNECTIONS,
                Some(added),
            )
            .await;
            let restored = database.change(&pg::remove_fortune_sql()).await;
            let second = second?;
            restored.map_err(|e| format!("cannot take the added fortune away: {e:#}"))?;
            out.push(ContractCheck::required(
                names::DB_ROWS,
                rows_read(scenario, &first).and_then(|a| {
                    rows_read(scenario, &second).map(|b| format!("{a}; with the added row, {b}"))
                }),
            ));
            out.push(ContractCheck::required(
                names::DB_FRESH,
                match &second.wrong {
                    None => Ok(format!(
                        "after fairground added a fortune with markup, all {} pages showed it, escaped",
                        second.requests
                    )),
                    Some(e) => Err(format!(
                        "after fairground added a fortune, {e}: a cached or hard-coded page"
                    )),
                },
            ));
            out.push(ContractCheck::required(
                names::DB_QUERIES,
                queries_issued(scenario, &first.merged(&second)),
            ));
        }
        Scenario::Updates(_) => {
            let sequential = run_burst(target, scenario, database, MIN_REQUESTS, 1, None).await?;
            let concurrent = run_burst(
                target,
                scenario,
                database,
                UPDATES_REQUESTS,
                CONNECTIONS,
                None,
            )
            .await;
            // The sequential burst's ids are read after the concurrent one
            // too: an id it touched that the concurrent burst did not must
            // still hold what the sequential burst left.
            let concurrent = concurrent?;
            out.push(ContractCheck::required(
                names::DB_PERSIST,
                persisted(&sequential, &concurrent, database).await,
            ));
            out.push(ContractCheck::required(
                names::DB_ROWS,
                rows_read(scenario, &sequential).and_then(|a| {
                    rows_read(scenario, &concurrent)
                        .map(|b| format!("{a}; over {CONNECTIONS} connections, {b}"))
                }),
            ));
            out.push(ContractCheck::required(
                names::DB_QUERIES,
                queries_issued(scenario, &sequential.merged(&concurrent)),
            ));
        }
        _ => {}
    }
    Ok(out)
}

/// What one burst returned and caused.
#[derive(Debug, Clone, Default)]
struct Burst {
    /// Requests answered.
    requests: u64,
    /// Rows of each answer in the order the answers came (empty for
    /// fortunes).
    answers: Vec<Vec<(u32, u32)>>,
    /// Rows of `fortune` each page had to be built from.
    fortune_rows: u64,
    /// The first page that did not show the added fortune, when one was.
    wrong: Option<String>,
    /// Work and statements between its start and its settled end.
    counts: StatementCounts,
    /// Requests sent while the counts settled ([`Nudges`]), not among
    /// `requests`.
    nudged: u64,
    /// Rows of the scenario's table the nudges need read (0 when they
    /// read the other table).
    nudge_rows: u64,
}

impl Burst {
    /// One connection's answers, and the first page lacking the added row.
    fn add(&mut self, (answers, wrong): (Vec<Vec<(u32, u32)>>, Option<String>)) {
        self.requests += answers.len() as u64;
        self.answers.extend(answers);
        self.wrong = self.wrong.take().or(wrong);
    }

    /// Both bursts as one, for the statement counts.
    fn merged(&self, other: &Burst) -> Burst {
        let a = self.counts;
        let b = other.counts;
        Burst {
            requests: self.requests + other.requests,
            answers: self.answers.iter().chain(&other.answers).cloned().collect(),
            fortune_rows: self.fortune_rows,
            wrong: None,
            nudged: self.nudged + other.nudged,
            nudge_rows: self.nudge_rows + other.nudge_rows,
            counts: StatementCounts {
                world_reads: a.world_reads + b.world_reads,
                world_updates: a.world_updates + b.world_updates,
                rows_updated: a.rows_updated + b.rows_updated,
                fortune_reads: a.fortune_reads + b.fortune_reads,
                total: a.total + b.total,
                at_unix_us: b.at_unix_us,
                world_rows_read: a.world_rows_read + b.world_rows_read,
                world_rows_written: a.world_rows_written + b.world_rows_written,
                fortune_rows_read: a.fortune_rows_read + b.fortune_rows_read,
            },
        }
    }

    /// "N requests", and the nudges sent besides.
    fn said(&self) -> String {
        match self.nudged {
            0 => format!("{} requests", self.requests),
            n if self.nudge_rows == 0 => format!(
                "{} requests (and {n} of the other table's while the counts settled)",
                self.requests
            ),
            n => format!(
                "{} requests (and {n} more while the counts settled, needing {} rows)",
                self.requests, self.nudge_rows
            ),
        }
    }

    fn rows(&self) -> u64 {
        self.answers.iter().map(|a| a.len() as u64).sum()
    }

    /// Rows of the scenario's table read, and the rows the answers and the
    /// nudges need read (`updates-N`: each row read, then looked up again
    /// by its write).
    fn read_need(&self, scenario: Scenario, c: &StatementCounts) -> (u64, u64) {
        match scenario {
            Scenario::Fortunes => (
                c.fortune_rows_read,
                self.fortune_rows * self.requests + self.nudge_rows,
            ),
            Scenario::Updates(_) => (
                c.world_rows_read,
                self.rows() + self.distinct_rows() + self.nudge_rows,
            ),
            _ => (c.world_rows_read, self.rows() + self.nudge_rows),
        }
    }

    /// Distinct ids of each answer, summed: the rows an updates burst must
    /// have written at least.
    fn distinct_rows(&self) -> u64 {
        self.answers
            .iter()
            .map(|a| a.iter().map(|r| r.0).collect::<BTreeSet<_>>().len() as u64)
            .sum()
    }
}

/// The work `scenario` needs for `burst`'s answers: whether `c` shows it.
fn enough(scenario: Scenario, burst: &Burst, c: &StatementCounts) -> bool {
    let (read, need) = burst.read_need(scenario, c);
    read >= need && written_enough(scenario, burst, c)
}

fn written_enough(scenario: Scenario, burst: &Burst, c: &StatementCounts) -> bool {
    !matches!(scenario, Scenario::Updates(_)) || c.world_rows_written >= burst.distinct_rows()
}

/// `requests` requests of `scenario` over `connections` keep-alive
/// connections at once, then the counts once settled. `added`: a fortune
/// row the table holds besides the published ones.
async fn run_burst(
    target: &Endpoint,
    scenario: Scenario,
    database: &impl DatabaseAccess,
    requests: u32,
    connections: u32,
    added: Option<(i32, &str)>,
) -> Result<Burst, String> {
    let unreadable = |e: anyhow::Error| format!("cannot read the database's counters: {e:#}");
    let before = database.counts().await.map_err(unreadable)?;
    let lanes = (0..connections).map(|lane| {
        let share = requests / connections + u32::from(lane < requests % connections);
        one_lane(target, scenario, share, added)
    });
    let mut burst = Burst {
        fortune_rows: db::FORTUNES.len() as u64 + u64::from(added.is_some()),
        ..Burst::default()
    };
    for lane in futures_util::future::join_all(lanes).await {
        burst.add(lane?);
    }
    // Read until the counts settle, nudging the backends that keep theirs
    // (docs/contract.md, "How work is counted"). A sequential burst is
    // nudged on one connection.
    let lanes = if connections == 1 {
        1
    } else {
        NUDGE_CONNECTIONS
    };
    let mut nudges = Nudges::new(Some(target), scenario, burst.fortune_rows, lanes);
    let mut settle = pg::Settle::new(std::time::Instant::now());
    loop {
        let now = database.counts().await.map_err(unreadable)?;
        burst.counts = before.since(now);
        burst.nudged = nudges.answered;
        burst.nudge_rows = nudges.rows;
        match settle.next(enough(scenario, &burst, &burst.counts)) {
            pg::Step::Done => break,
            pg::Step::Nudge => {
                let answered = pg::Nudge::nudge(&mut nudges).await;
                settle.nudged(answered);
            }
            pg::Step::Wait(t) => tokio::time::sleep(t).await,
        }
    }
    if scenario == Scenario::Fortunes {
        burst.answers.clear();
    }
    Ok(burst)
}

/// Nudges of the database's backends after a burst or a round of
/// `scenario`: waves of one request per connection, each of one
/// statement. First of the *other* table's scenario (`fortunes` after a
/// `world` scenario, `db` after `fortunes`): its backends flush what they
/// kept, and its own reads land in a table the check does not count, so
/// nothing of the nudge is left to wait for and no row of it can stand in
/// for a missing one. A server that does not answer that scenario 2xx
/// (it does not declare it) is nudged with the cheapest request of the
/// same table (`db`: one row; `fortunes`: one page) from then on, whose
/// rows join the need ([`Nudges::rows`]).
pub struct Nudges<'a> {
    /// The server; without one (no HTTP/1.1 address) nothing is sent and
    /// the counts are waited for.
    target: Option<&'a Endpoint>,
    scenario: Scenario,
    /// Rows of `fortune` a page holds now.
    page_rows: u64,
    lanes: u32,
    same_table: bool,
    /// 2xx answers of every wave.
    pub answered: u64,
    /// Rows of the scenario's table the same-table waves need read.
    pub rows: u64,
}

impl<'a> Nudges<'a> {
    /// Nudges of `target` for `scenario` over `lanes` connections at once;
    /// `page_rows`: the rows a fortunes page holds now.
    pub fn new(
        target: Option<&'a Endpoint>,
        scenario: Scenario,
        page_rows: u64,
        lanes: u32,
    ) -> Self {
        Nudges {
            target,
            scenario,
            page_rows,
            lanes,
            same_table: false,
            answered: 0,
            rows: 0,
        }
    }
}

impl pg::Nudge for Nudges<'_> {
    async fn nudge(&mut self) -> u64 {
        let Some(target) = self.target else { return 0 };
        let fortunes = self.scenario == Scenario::Fortunes;
        let (asked, rows_each) = match (self.same_table, fortunes) {
            (false, false) => (Scenario::Fortunes, 0),
            (false, true) => (Scenario::Db, 0),
            (true, false) => (Scenario::Db, 1),
            (true, true) => (Scenario::Fortunes, self.page_rows),
        };
        let one = move |req: Request| async move {
            let mut session = Session::new(target);
            matches!(session.request(&req).await, Ok(r) if (200..300).contains(&r.status))
        };
        let sent = (0..self.lanes).map(|_| one(contract::sample_request(asked, &mut rand::rng())));
        let answered = futures_util::future::join_all(sent)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count() as u64;
        if answered == 0 && !self.same_table {
            self.same_table = true;
        }
        self.answered += answered;
        self.rows += answered * rows_each;
        answered
    }

    fn rows(&self) -> u64 {
        self.rows
    }
}

/// What one connection's share of a burst returned, and the first page
/// lacking `added`.
async fn one_lane(
    target: &Endpoint,
    scenario: Scenario,
    share: u32,
    added: Option<(i32, &str)>,
) -> Result<(Vec<Vec<(u32, u32)>>, Option<String>), String> {
    let mut session = Session::new(target);
    let mut answers = Vec::new();
    let mut wrong = None;
    for i in 0..share {
        let req: Request = contract::sample_request(scenario, &mut rand::rng());
        let label = format!("{} {} ({} of {share})", req.method, req.path, i + 1);
        let resp = session
            .request(&req)
            .await
            .map_err(|e| format!("{label}: {e}"))?;
        match (scenario, added) {
            (Scenario::Fortunes, Some(row)) => {
                let page = String::from_utf8_lossy(&resp.body);
                let judged = if resp.status == 200 {
                    db::check_fortunes_with(&page, Some(row))
                } else {
                    Err(format!("status {}", resp.status))
                };
                if let Err(e) = judged {
                    wrong.get_or_insert(format!("{label}: {e}"));
                }
                answers.push(Vec::new());
            }
            _ => {
                super::scenario::judge(scenario, &req, &resp)
                    .map_err(|e| format!("{label}: {e}"))?;
                answers.push(match scenario {
                    Scenario::Fortunes => Vec::new(),
                    Scenario::Db => db::check_world(&resp.body, None)?,
                    _ => db::check_world(&resp.body, Some(db::count_in_path(&req.path)))?,
                });
            }
        }
    }
    Ok((answers, wrong))
}

async fn values_true(
    burst: &Burst,
    database: &impl DatabaseAccess,
    when: &str,
) -> Result<String, String> {
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
            "{when}{} rows returned over {CONNECTIONS} connections, each the stored number of its id",
            rows.len()
        ))
    } else {
        Err(format!(
            "{when}{} of {} rows returned are not what the table holds: {}",
            wrong.len(),
            rows.len(),
            wrong.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
        ))
    }
}

/// Each id's numbers an updates burst may have left: under one connection
/// those the last request touching it returned, under several any returned.
fn may_hold(burst: &Burst, sequential: bool) -> BTreeMap<u32, BTreeSet<u32>> {
    let mut out: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for answer in &burst.answers {
        let mut this: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        for (id, n) in answer {
            this.entry(*id).or_default().insert(*n);
        }
        for (id, ns) in this {
            let e = out.entry(id).or_default();
            if sequential {
                *e = ns;
            } else {
                e.extend(ns);
            }
        }
    }
    out
}

/// The ids of `sequential` that `concurrent` did not touch hold the number
/// the last request touching them returned; those `concurrent` touched
/// hold one it returned for them. Exactly: no lost write is allowed.
async fn persisted(
    sequential: &Burst,
    concurrent: &Burst,
    database: &impl DatabaseAccess,
) -> Result<String, String> {
    let mut expect = may_hold(sequential, true);
    let later = may_hold(concurrent, false);
    let seq_ids = expect.len();
    expect.extend(later.clone());
    let ids: Vec<u32> = expect.keys().copied().collect();
    let stored = database
        .stored(&ids)
        .await
        .map_err(|e| format!("cannot read the world table: {e:#}"))?;
    let lost: Vec<String> = expect
        .iter()
        .filter(|(id, ns)| !stored.get(id).is_some_and(|s| ns.contains(s)))
        .map(|(id, ns)| {
            format!(
                "id {id} holds {}, returned {}",
                stored.get(id).map_or("nothing".into(), u32::to_string),
                ns.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        })
        .collect();
    let text = format!(
        "{seq_ids} ids updated one request at a time and {} over {CONNECTIONS} connections",
        later.len()
    );
    if lost.is_empty() {
        Ok(format!("{text}: each holds a number returned for it"))
    } else {
        Err(format!(
            "updates do not persist: {} of the {} ids ({text}) hold no number returned for them: {}",
            lost.len(),
            ids.len(),
            lost.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
        ))
    }
}

/// Whether the executor read (and wrote) the rows `burst`'s answers stand
/// for, by the tables' own counters.
fn rows_read(scenario: Scenario, burst: &Burst) -> Result<String, String> {
    let c = burst.counts;
    let (read, need) = burst.read_need(scenario, &c);
    // Per request of the burst, the nudges' rows taken off.
    let per = |n: u64, nudges: u64| n.saturating_sub(nudges) as f64 / burst.requests.max(1) as f64;
    let short = |what: &str, got: u64, need: u64, nudges: u64| {
        Err(format!(
            "PostgreSQL's executor did less work than the answers stand for ({what}: {got}, \
             {:.2} per request, at least {need} needed for {}): a cache or a fake",
            per(got, nudges),
            burst.said()
        ))
    };
    let table = if scenario == Scenario::Fortunes {
        "fortune"
    } else {
        "world"
    };
    if read < need {
        return short(
            &format!("rows of {table} read"),
            read,
            need,
            burst.nudge_rows,
        );
    }
    if !written_enough(scenario, burst, &c) {
        return short(
            "rows of world updated",
            c.world_rows_written,
            burst.distinct_rows(),
            0,
        );
    }
    Ok(match scenario {
        Scenario::Fortunes => format!(
            "{}, {read} rows of fortune read ({:.2} per page, the table has {})",
            burst.said(),
            per(read, burst.nudge_rows),
            burst.fortune_rows
        ),
        Scenario::Updates(_) => format!(
            "{}, {read} rows of world read and {} updated ({:.2} and {:.2} per request)",
            burst.said(),
            c.world_rows_written,
            per(read, burst.nudge_rows),
            per(c.world_rows_written, 0)
        ),
        _ => format!(
            "{} answered {} rows, {read} rows of world read ({:.2} per request)",
            burst.said(),
            burst.rows(),
            per(read, burst.nudge_rows)
        ),
    })
}

/// The second figure: statements counted by `pg_stat_statements` (their
/// text, which a liar can shape, but the scenario's rule is one statement
/// per row).
fn queries_issued(scenario: Scenario, burst: &Burst) -> Result<String, String> {
    let c = burst.counts;
    let requests = burst.requests;
    let rows = burst.rows();
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
            let distinct = burst.distinct_rows();
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
        Burst {
            requests: answers.len() as u64,
            answers,
            fortune_rows: 12,
            wrong: None,
            counts,
            nudged: 0,
            nudge_rows: 0,
        }
    }

    #[test]
    fn too_few_statements_is_a_cache() {
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
    fn statements_that_read_no_row_are_no_work() {
        // `SELECT 1 FROM world LIMIT 0` per row: statements as many as
        // rows, rows read none.
        let rows = vec![vec![(1, 2)]; 20];
        let cheap = StatementCounts {
            world_reads: 20,
            total: 20,
            ..Default::default()
        };
        let b = burst(rows.clone(), cheap);
        assert!(queries_issued(Scenario::Db, &b).is_ok());
        assert!(!enough(Scenario::Db, &b, &b.counts));
        let e = rows_read(Scenario::Db, &b).unwrap_err();
        assert!(
            e.contains("rows of world read: 0") && e.contains("at least 20"),
            "{e}"
        );
        let honest = StatementCounts {
            world_rows_read: 20,
            ..cheap
        };
        assert!(rows_read(Scenario::Db, &burst(rows, honest)).is_ok());
        // A fortunes page needs every row of the table read.
        let pages = burst(
            vec![Vec::new(); 10],
            StatementCounts {
                fortune_reads: 10,
                fortune_rows_read: 119,
                ..Default::default()
            },
        );
        assert!(rows_read(Scenario::Fortunes, &pages)
            .unwrap_err()
            .contains("at least 120"));
    }

    #[test]
    fn updates_need_their_reads_and_one_write_per_distinct_id() {
        let answers = vec![vec![(1, 5), (2, 6), (2, 7)]; 2];
        let batched = StatementCounts {
            world_reads: 6,
            world_updates: 2,
            rows_updated: 4,
            world_rows_read: 10,
            world_rows_written: 4,
            ..Default::default()
        };
        let b = burst(answers.clone(), batched);
        let ok = queries_issued(Scenario::Updates(3), &b).unwrap();
        assert!(
            ok.contains("batched: 1.00 UPDATE statements per request"),
            "{ok}"
        );
        assert!(rows_read(Scenario::Updates(3), &b).is_ok());
        // Writes without reads: every write looks its row up once, the
        // reads the answers claim never happened.
        let write_only = StatementCounts {
            world_updates: 4,
            rows_updated: 4,
            world_rows_read: 4,
            world_rows_written: 4,
            ..Default::default()
        };
        let e = rows_read(Scenario::Updates(3), &burst(answers.clone(), write_only)).unwrap_err();
        assert!(
            e.contains("rows of world read: 4,") && e.contains("at least 10 needed"),
            "{e}"
        );
        let unwritten = StatementCounts {
            world_reads: 6,
            world_rows_read: 10,
            ..Default::default()
        };
        let b = burst(answers, unwritten);
        assert!(queries_issued(Scenario::Updates(3), &b)
            .unwrap_err()
            .contains("rows updated: 0, at least 4"));
        assert!(rows_read(Scenario::Updates(3), &b)
            .unwrap_err()
            .contains("rows of world updated: 0"));
    }

    #[test]
    fn a_sequential_burst_must_leave_the_last_number_and_a_concurrent_one_any() {
        let seq = burst(
            vec![vec![(1, 5)], vec![(1, 6)], vec![(2, 7), (2, 8)]],
            StatementCounts::default(),
        );
        let held = may_hold(&seq, true);
        assert_eq!(held[&1], BTreeSet::from([6]));
        assert_eq!(held[&2], BTreeSet::from([7, 8]));
        let held = may_hold(&seq, false);
        assert_eq!(held[&1], BTreeSet::from([5, 6]));
    }
}

//! results.md: the page people read and publish. Environment verdict first,
//! then a summary matrix, then one table per scenario, then a note for every
//! flag and rejection. Accepted numbers are plain; flagged ones carry a ⚑
//! marker linking to their note; rejected ones show the reason instead of a
//! number; a forced (unaccepted) environment marks every figure with †.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::context::{self, Align, Grid, Text};
use super::fmt::{cell as esc, micros, percent, thousands};
use super::view::{
    errors_text, floor_mark, latency_figure, mean_of_answered, noted, objective_rows,
    objectives_tally, precision_interval, precision_mark, rank_mark, rejection_labels, Column,
    RunView, OBJECTIVES_METHOD, OBJECTIVE_HEAD, PRECISION_METHOD,
};
use super::{Exporter, Rendered};
use crate::contract::Scenario;
use crate::results::{Cell, CellKey, CheckStatus, RankGroup, Results, Status};

/// results.md.
pub struct ResultsMarkdown;

struct Page<'a> {
    view: RunView<'a>,
    dagger: &'static str,
}

impl<'a> Page<'a> {
    fn new(r: &'a Results) -> Page<'a> {
        Page {
            view: RunView::new(r),
            dagger: if r.environment.forced { " †" } else { "" },
        }
    }

    fn note_link(&self, key: &CellKey) -> String {
        self.view
            .note(key)
            .map(|n| format!(" [{n}](#note-{n})"))
            .unwrap_or_default()
    }

    /// The marker a figure of `c` carries: ⚑ and its note when flagged.
    fn flag(&self, c: &Cell) -> String {
        if noted(c).is_empty() {
            String::new()
        } else {
            format!(" ⚑{}", self.note_link(&c.key))
        }
    }

    /// What a rejected cell shows instead of its figures.
    fn rejected(&self, c: &Cell) -> String {
        format!(
            "✗ {}{}",
            rejection_labels(c).join(", "),
            self.note_link(&c.key)
        )
    }

    /// The req/s figure as a table shows it, with its marker.
    fn headline(&self, c: &Cell) -> String {
        match c.verdict.status {
            Status::Rejected => self.rejected(c),
            _ => {
                let v = c
                    .summary
                    .as_ref()
                    .map(|s| thousands(s.throughput_rps.median))
                    .unwrap_or_else(|| "–".into());
                format!(
                    "{}{v}{}{}{}{}",
                    floor_mark(c),
                    precision_mark(c),
                    rank_mark(c),
                    self.dagger,
                    self.flag(c)
                )
            }
        }
    }

    /// A fixed-rate cell's headline: latency measured from each request's
    /// scheduled send (p50 / p99 / p99.9), and the rate it achieved. Every
    /// framework that keeps up shows the target as its req/s, so req/s
    /// ranks nothing there.
    fn latency_headline(&self, c: &Cell) -> String {
        match (c.verdict.status, latency_figure(c)) {
            (Status::Rejected, _) => self.rejected(c),
            (_, None) => "–".into(),
            (_, Some(figure)) => format!(
                "{figure}{}{}{}{}",
                precision_mark(c),
                rank_mark(c),
                self.dagger,
                self.flag(c)
            ),
        }
    }
}

impl Exporter<Results> for ResultsMarkdown {
    fn render(&self, r: &Results) -> anyhow::Result<Vec<Rendered>> {
        let page = Page::new(r);
        let mut s = String::new();
        header(&mut s, r);
        environment(&mut s, r);
        hosts(&mut s, r);
        method(&mut s, r);
        summary(&mut s, &page);
        objectives(&mut s, r);
        for scenario in r.scenarios() {
            scenario_table(&mut s, &page, scenario);
        }
        notes(&mut s, &page);
        loader_warnings(&mut s, r);
        exclusions(&mut s, r);
        Ok(vec![Rendered {
            path: PathBuf::from("results.md"),
            bytes: s.into_bytes(),
        }])
    }
}

/// The objectives table: one row per objective and cell.
fn objectives(s: &mut String, r: &Results) {
    if r.objectives.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## Objectives: {}\n\n{}\n",
        objectives_tally(r),
        OBJECTIVES_METHOD
    );
    let _ = writeln!(
        s,
        "| {} |\n|---|---|---|---|---|---|",
        OBJECTIVE_HEAD.join(" | ")
    );
    for row in objective_rows(r) {
        let bold = |t: &str| {
            if row.status == crate::results::ObjectiveStatus::Met {
                t.to_string()
            } else {
                format!("**{t}**")
            }
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} |",
            esc(row.objective),
            esc(row.framework),
            esc(&row.column),
            bold(&row.verdict),
            esc(&row.interval),
            esc(row.why)
        );
    }
    s.push('\n');
}

fn header(s: &mut String, r: &Results) {
    let _ = writeln!(s, "# fairground results: profile `{}`\n", r.profile_name);
    let _ = writeln!(
        s,
        "- Run `{}`, fairground {}",
        r.run_id, r.fairground_version
    );
    if let Some(g) = &r.git {
        let _ = writeln!(
            s,
            "- Code: commit `{}`{}{}",
            g.short(),
            g.branch
                .as_ref()
                .map(|b| format!(" on branch `{b}`"))
                .unwrap_or_default(),
            if g.dirty {
                " (the work tree had uncommitted changes)"
            } else {
                ""
            }
        );
    }
    let started = r.started_at.format("%Y-%m-%d %H:%M:%S UTC");
    match r.finished_at {
        Some(end) => {
            let mins = (end - r.started_at).num_seconds() as f64 / 60.0;
            let _ = writeln!(
                s,
                "- Started {started}, finished {} ({mins:.0} min)",
                end.format("%Y-%m-%d %H:%M:%S UTC")
            );
        }
        None => {
            let _ = writeln!(s, "- Started {started}; not finished");
        }
    }
    let count = |st: Status| r.cells.iter().filter(|c| c.verdict.status == st).count();
    let _ = writeln!(
        s,
        "- Cells: {} planned, {} measured: {} accepted, {} flagged, {} rejected",
        r.plan.len(),
        r.cells.len(),
        count(Status::Accepted),
        count(Status::Flagged),
        count(Status::Rejected)
    );
    if let Some(p) = &r.precision {
        let _ = writeln!(s, "- Precision: {}", p.sentence());
    }
    if let Some(b) = &r.budget {
        let _ = writeln!(s, "- Time: {}", b.sentence());
    }
    let left = r.remaining();
    if r.interrupted || !left.is_empty() {
        let _ = writeln!(
            s,
            "- **Incomplete**: {} planned cell(s) were not measured (listed at the end){}",
            left.len(),
            if r.interrupted {
                "; the run was interrupted"
            } else {
                ""
            }
        );
    }
    s.push('\n');
}

fn environment(s: &mut String, r: &Results) {
    let env = &r.environment;
    s.push_str("## Environment\n\n");
    match (env.status, env.forced) {
        (CheckStatus::Fail, true) => s.push_str(
            "> **† Environment NOT accepted.** Preflight failed and the run went ahead anyway \
             (`--accept-env`, or the profile's `preflight: warn`). Every figure below is marked † and flagged; do not compare it with \
             results from an accepted environment.\n\n",
        ),
        (CheckStatus::Fail, false) => {
            s.push_str("Preflight: **fail**. These results were not produced by a run that passed preflight.\n\n")
        }
        (CheckStatus::Warn, _) => s.push_str(
            "Preflight: **warn**: the results stand; the warnings below are worth knowing.\n\n",
        ),
        (CheckStatus::Pass, _) => s.push_str("Preflight: **pass**.\n\n"),
    }
    if let Some(g) = context::checks(r) {
        grid(s, &g);
    }
}

/// A grid as a Markdown table, every cell escaped, then a blank line.
fn grid(s: &mut String, g: &Grid) {
    for (h, _) in &g.head {
        let _ = write!(s, "| {h} ");
    }
    s.push_str("|\n");
    for (_, align) in &g.head {
        s.push_str(match align {
            Align::Left => "|---",
            Align::Right => "|--:",
        });
    }
    s.push_str("|\n");
    for row in &g.rows {
        for cell in &row.cells {
            let _ = match cell {
                Text::Code(c) => write!(s, "| `{}` ", esc(c)),
                other => write!(s, "| {} ", esc(other.as_str())),
            };
        }
        s.push_str("|\n");
    }
    s.push('\n');
}

/// The run's topology (profile `hosts:`) and each loader's share of every
/// round; nothing for a one-daemon run.
fn hosts(s: &mut String, r: &Results) {
    let Some(t) = &r.topology else { return };
    s.push_str(
        "## Hosts

",
    );
    let _ = writeln!(
        s,
        "{}\n",
        crate::report::view::hosts_sentence(t, |c| format!("`{}`", esc(c)), esc)
    );
    if let Some(g) = context::carried_images(t) {
        grid(s, &g);
    }
    for c in &t.clocks {
        let _ = writeln!(
            s,
            "- clock of `{}`: {:+.1} ms against the orchestrator's (± {:.1} ms)",
            esc(&c.endpoint),
            c.offset_ms,
            c.round_trip_ms / 2.0
        );
    }
    for p in &t.preflight {
        let _ = writeln!(
            s,
            "- preflight on `{}` (fairground's image, that host's /proc and /sys): **{}**",
            esc(&p.endpoint),
            esc(&p.verdict)
        );
        for c in p.checks.iter().filter(|c| c.verdict != "pass") {
            let _ = writeln!(
                s,
                "  - {} {}: {}",
                esc(&c.verdict),
                esc(&c.id),
                esc(&c.measured)
            );
        }
    }
    if !t.clocks.is_empty() || !t.preflight.is_empty() {
        s.push('\n');
    }
    let shared: Vec<_> = r
        .cells
        .iter()
        .flat_map(|c| c.rounds.iter().map(move |round| (c, round)))
        .filter(|(_, round)| !round.loaders.is_empty())
        .collect();
    if shared.is_empty() {
        return;
    }
    s.push_str(
        "Each loader's part of each round (the round's figures are these merged: counts \
         summed, histograms added):\n\n\
         | cell | round | loader | connections | 2xx | req/s | p50 | p99 | loader CPU | window start skew |\n\
         |---|--:|---|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for (c, round) in shared {
        for l in &round.loaders {
            let _ = writeln!(
                s,
                "| {} | {} | `{}` | {}/{} | {} | {} | {} | {} | {} | {:.1} ms |",
                esc(&c.key.stem()),
                round.index + 1,
                esc(&l.endpoint),
                l.connections_established,
                l.connections_requested,
                l.responses_2xx,
                crate::units::thousands(l.throughput_rps),
                crate::units::micros(l.p50_us as f64),
                crate::units::micros(l.p99_us as f64),
                crate::units::percent(l.cpu_fraction),
                l.window_start_skew_ms
            );
        }
    }
    s.push('\n');
}

fn method(s: &mut String, r: &Results) {
    let t = &r.thresholds;
    s.push_str("## How to read these numbers\n\n");
    s.push_str(
        "- **req/s**: 2xx responses per second of the measured window (non-2xx responses never \
         count), the median over rounds (rounds left out on a busy host or a slowed machine \
         excluded); min–max across rounds beside it.\n\
         - **latency**: from sending the request (from its scheduled send time in fixed-rate \
         mode) to the end of the response, from the HDR histogram of every round's measured \
         window merged; average, 99th percentile and maximum.\n\
         - **errors**: socket errors (connect, read, write, timeout, parse) plus non-2xx \
         responses over all rounds, and their share of all attempts.\n\
         - **conns**: connections the loader really held open (fewest in any round) / \
         connections requested.\n\
         - **Markers**: ⚑ flagged: the number is real but read its note before comparing; \
         ✗ rejected: not a valid measurement, the reason replaces the number; \
         † environment not accepted.\n",
    );
    let scenarios = &r.profile.scenarios;
    if scenarios.iter().any(|s| s.is_websocket()) {
        s.push_str(
            "- **WebSocket** (`ws-*`): a message is what HTTP calls a request. **msg/s** counts \
             echoes equal, byte for byte, to the message sent (a wrong echo is an error, never \
             throughput), and latency runs from a message's send to the end of its echo. \
             `ws-idle` holds its connections and pings each once a second: **pings/s** and \
             the ping's round trip, and the memory each held connection costs.\n",
        );
    }
    if scenarios.iter().any(|s| s.is_grpc()) {
        s.push_str(
            "- **gRPC** (`grpc-*`): a call is what HTTP calls a request. **rpc/s** counts calls \
             answered with `grpc-status: 0` and the reply the call asked for (another status, or \
             a wrong reply, is an error, never throughput); latency runs from a call's send to \
             the end of its trailers.\n",
        );
    }
    let _ = writeln!(
        s,
        "- **Gates**: {} docs/results.md gives every threshold's source.\n",
        super::view::gates_sentence(t)
    );
}

/// What the rank groups mean, under a summary table that shows them.
const RANKS: &str = "#N is the cell's rank group among the frameworks of its column: \
    frameworks whose rounds cannot be told apart share places (#1–3), by the interval \
    `compare` uses, each pair at 1 − 0.05/pairs (docs/results.md).\n\n";

/// The same where the run interleaved its rounds and pairs were judged
/// block by block.
const RANKS_PAIRED: &str = "#N is the cell's rank group among the frameworks of its column: \
    frameworks that cannot be told apart share places (#1–3), judged on the ratios of \
    rounds measured in the same block (frameworks interleaved round by round, so a slow \
    phase of the machine moves both and cancels), each pair at 1 − 0.05/pairs \
    (docs/results.md).\n\n";

fn summary(s: &mut String, page: &Page<'_>) {
    let (fixed, closed): (Vec<Column>, Vec<Column>) = page
        .view
        .columns(None)
        .into_iter()
        .partition(Column::fixed_rate);
    // WebSocket cells count echoed messages (msg/s), gRPC cells calls
    // (rpc/s).
    let scenarios: Vec<Scenario> = closed.iter().map(|c| c.scenario).collect();
    let title = format!(
        "## Summary: {}, median of rounds\n\n",
        super::view::rate_words(&scenarios)
    );
    summary_table(s, page, &title, &closed, |p, c| p.headline(c));
    summary_table(
        s,
        page,
        "## Summary: latency at a fixed rate\n\n\
         Latency from each request's scheduled send time (no coordinated omission), all \
         rounds' histograms merged: p50 / p99 / p99.9, then the request rate achieved \
         (median of rounds). At a fixed rate every framework that keeps up shows the target \
         as its req/s, so latency is the figure that ranks them.\n\n",
        &fixed,
        |p, c| p.latency_headline(c),
    );
}

fn summary_table<'a>(
    s: &mut String,
    page: &Page<'a>,
    title: &str,
    cols: &[Column],
    headline: impl Fn(&Page<'a>, &Cell) -> String,
) {
    if cols.is_empty() {
        return;
    }
    s.push_str(title);
    let ranks: Vec<&RankGroup> = cols
        .iter()
        .flat_map(|col| {
            page.view
                .frameworks()
                .iter()
                .filter_map(|fw| page.view.find(fw, *col).and_then(|c| c.rank.as_ref()))
                .collect::<Vec<_>>()
        })
        .collect();
    if !ranks.is_empty() {
        s.push_str(if ranks.iter().all(|r| r.paired) {
            RANKS_PAIRED
        } else {
            RANKS
        });
    }
    let precise = cols.iter().any(|col| {
        page.view.frameworks().iter().any(|fw| {
            page.view
                .find(fw, *col)
                .is_some_and(|c| c.precision.is_some())
        })
    });
    if precise {
        let _ = write!(s, "{PRECISION_METHOD}\n\n");
    }
    s.push_str("| framework |");
    for c in cols {
        let _ = write!(s, " {} |", c.label());
    }
    s.push_str("\n|---|");
    s.push_str(&"--:|".repeat(cols.len()));
    s.push('\n');
    for fw in page.view.frameworks() {
        let _ = write!(s, "| {fw} |");
        for col in cols {
            let text = match page.view.find(fw, *col) {
                Some(c) => headline(page, c),
                None => page.view.missing(fw, *col).text().to_string(),
            };
            let _ = write!(s, " {} |", esc(&text));
        }
        s.push('\n');
    }
    s.push('\n');
}

fn scenario_table(s: &mut String, page: &Page<'_>, scenario: Scenario) {
    let _ = writeln!(s, "## {scenario}\n");
    let unit = scenario.rate_unit();
    if scenario.is_websocket() {
        s.push_str(
            "Messages echoed per second over upgraded WebSocket connections: an answer is \
             an echo equal, byte for byte, to the message sent; latency is per message.\n\n",
        );
    }
    if let Scenario::GrpcStream(n) = scenario {
        let _ = write!(
            s,
            "gRPC server streams per second over HTTP/2: an answer is all {n} replies, in \
             order, each with the call's id and its index, then `grpc-status: 0` in the \
             trailers ({n} replies per call); latency is per call, to its last reply.\n\n",
        );
    } else if scenario.is_grpc() {
        s.push_str(
            "Unary gRPC calls per second over HTTP/2: an answer is a reply with the call's id \
             and payload and `grpc-status: 0` in its trailers; latency is per call.\n\n",
        );
    }
    let _ = write!(
        s,
        "| framework | conns | {unit} | min–max {unit} | 95% interval | mean of answered | p99 latency | max latency | errors | verdict |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n",
    );
    let d = page.dagger;
    for col in page.view.columns(Some(scenario)) {
        for fw in page.view.frameworks() {
            // A protocol other than http1 is named beside the framework.
            let name = if col.protocol.is_http1() {
                fw.to_string()
            } else {
                format!("{fw} ({})", col.protocol)
            };
            let Some(c) = page.view.find(fw, col) else {
                if let Some(reason) = page.view.skipped_reason(fw, col) {
                    let _ = writeln!(
                        s,
                        "| {name} | {} | skipped | | | | | | | {} |",
                        thousands(f64::from(col.concurrency)),
                        esc(reason)
                    );
                }
                continue;
            };
            let conns = c
                .summary
                .as_ref()
                .map(|x| {
                    format!(
                        "{}/{}",
                        thousands(x.connections_serving_min as f64),
                        thousands(f64::from(c.key.concurrency))
                    )
                })
                .unwrap_or_else(|| format!("–/{}", thousands(f64::from(c.key.concurrency))));
            let errors = errors_text(c).unwrap_or_else(|| "–".into());
            let verdict = format!("{}{}", c.verdict.status, page.note_link(&c.key));
            match (&c.summary, c.verdict.status) {
                (Some(x), Status::Accepted | Status::Flagged) => {
                    let _ = writeln!(
                        s,
                        "| {name} | {conns} | {} | {}–{}{d} | {} | {}{d} | {}{d} | {}{d} | {errors} | {verdict} |",
                        page.headline(c),
                        thousands(x.throughput_rps.min),
                        thousands(x.throughput_rps.max),
                        precision_interval(c).map_or("–".into(), |p| format!("{p}{d}")),
                        mean_of_answered(&x.latency).unwrap_or_else(|| "–".into()),
                        x.latency.show(x.latency.p99_us),
                        x.latency.show(x.latency.max_us),
                    );
                }
                _ => {
                    let _ = writeln!(
                        s,
                        "| {name} | {conns} | {} | | | | | | {errors} | {verdict} |",
                        esc(&page.headline(c))
                    );
                }
            }
        }
    }
    s.push('\n');
    if scenario.needs_database() {
        database_table(s, page, scenario);
    }
    if scenario == Scenario::WsIdle {
        per_connection_table(s, page, scenario);
    }
}

/// What each held connection costs the server (`ws-idle`): memory before
/// the load, under it (medians of rounds), and their difference per
/// connection established.
fn per_connection_table(s: &mut String, page: &Page<'_>, scenario: Scenario) {
    let median = |c: &Cell, f: &dyn Fn(&crate::results::Round) -> Option<f64>| {
        let v: Vec<f64> = c.rounds.iter().filter_map(f).collect();
        crate::stats::median(&v)
    };
    let bytes = |v: Option<f64>| v.map_or("–".into(), crate::units::bytes);
    let mut rows = Vec::new();
    for col in page.view.columns(Some(scenario)) {
        for fw in page.view.frameworks() {
            let Some(c) = page.view.find(fw, col) else {
                continue;
            };
            rows.push(format!(
                "| {fw} | {} | {} | {} | {} |",
                thousands(f64::from(col.concurrency)),
                bytes(median(c, &|r| r
                    .server
                    .memory_before_bytes
                    .map(|b| b as f64))),
                bytes(median(c, &|r| r
                    .server
                    .memory_median_bytes
                    .map(|b| b as f64))),
                bytes(
                    c.summary
                        .as_ref()
                        .and_then(|x| x.memory_per_connection_bytes.as_ref())
                        .map(|a| a.median)
                ),
            ));
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        s,
        "Memory per connection: the server's memory under load (the median of its 250 ms \
         samples) less its memory before the load, over the connections established; the \
         median of rounds.\n\n\
         | framework | conns | memory before | memory held | per connection |\n\
         |---|--:|--:|--:|--:|\n{}\n\n",
        rows.join("\n")
    );
}

/// The database's side of a database scenario's cells: medians over the
/// rounds of its CPU per response, its memory, the statements PostgreSQL
/// counted per response, and whose cores it shared.
fn database_table(s: &mut String, page: &Page<'_>, scenario: Scenario) {
    let median = |c: &Cell, f: &dyn Fn(&crate::results::DatabaseUse) -> Option<f64>| {
        let v: Vec<f64> = c
            .rounds
            .iter()
            .filter_map(|r| r.database.as_ref().and_then(f))
            .collect();
        crate::stats::median(&v)
    };
    let mut rows = Vec::new();
    for col in page.view.columns(Some(scenario)) {
        for fw in page.view.frameworks() {
            let Some(c) = page.view.find(fw, col) else {
                continue;
            };
            if c.rounds.iter().all(|r| r.database.is_none()) {
                continue;
            }
            let shares = c
                .rounds
                .iter()
                .find_map(|r| r.database.as_ref()?.shares_cores_with.clone())
                .unwrap_or_else(|| "nothing".into());
            rows.push(format!(
                "| {fw} | {} | {} | {} | {} | {} | {} |",
                thousands(f64::from(col.concurrency)),
                median(c, &|d| d.cpu_us_per_request).map_or("–".into(), micros),
                median(c, &|d| d.saturation).map_or("–".into(), percent),
                median(c, &|d| d.queries_per_request).map_or("–".into(), |q| format!("{q:.2}")),
                median(c, &|d| d.memory_median_bytes.map(|b| b as f64))
                    .map_or("–".into(), crate::units::bytes),
                esc(&shares),
            ));
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "Its database (PostgreSQL, medians over the rounds; queries as `pg_stat_statements` counted them):\n\n\
         | framework | conns | db CPU / response | db CPU ceiling | queries / response | db memory | shares cores with |\n\
         |---|--:|--:|--:|--:|--:|---|"
    );
    for r in rows {
        let _ = writeln!(s, "{r}");
    }
    s.push('\n');
}

fn notes(s: &mut String, page: &Page<'_>) {
    let notes = context::notes(&page.view);
    if notes.is_empty() {
        return;
    }
    s.push_str("## Notes on flagged and rejected cells\n\n");
    for note in notes {
        let _ = writeln!(
            s,
            "<a id=\"note-{n}\"></a>**{n}. {}: {}**\n",
            esc(&note.key.to_string()),
            note.status,
            n = note.n
        );
        for line in &note.lines {
            let _ = writeln!(s, "- {}", esc(line));
        }
        s.push('\n');
    }
}

/// What the loader warned about, cell by cell and round by round, in its
/// words: a stream limit, connections a limit capped, a missed rate.
fn loader_warnings(s: &mut String, r: &Results) {
    let warned: Vec<_> = r
        .cells
        .iter()
        .flat_map(|c| {
            c.rounds.iter().flat_map(move |x| {
                x.loader_warnings
                    .iter()
                    .map(move |w| (c.key.to_string(), x.index, w))
            })
        })
        .collect();
    if warned.is_empty() {
        return;
    }
    s.push_str(
        "## Loader warnings

",
    );
    for (key, round, w) in warned {
        let _ = writeln!(s, "- {}, round {}: {}", esc(&key), round + 1, esc(w));
    }
    s.push('\n');
}

/// What produced no result, and what was not measured.
fn exclusions(s: &mut String, r: &Results) {
    for part in context::appendix(r) {
        let _ = writeln!(s, "## {}\n", part.title);
        if let Some(intro) = part.intro {
            let _ = writeln!(s, "{intro}\n");
        }
        grid(s, &part.grid);
    }
    let left = context::not_measured(r);
    if !left.is_empty() {
        let (before, code, after) = context::NOT_MEASURED_INTRO;
        let _ = writeln!(
            s,
            "## {}\n\n{before}`{code}`{after}\n",
            context::NOT_MEASURED
        );
        for k in left {
            let _ = writeln!(s, "- {}", esc(&k));
        }
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::LoaderShare;

    #[test]
    fn the_loaders_warnings_reach_the_page_by_cell_and_round() {
        let mut r = crate::testdata::sample_results();
        let w = "the server allows 4 concurrent streams per connection \
                 (SETTINGS_MAX_CONCURRENT_STREAMS), fewer than --streams 32";
        r.cells[0].rounds[1].loader_warnings = vec![w.to_string()];
        let key = r.cells[0].key.to_string();
        let md = String::from_utf8(ResultsMarkdown.render(&r).unwrap().remove(0).bytes).unwrap();
        assert!(md.contains("## Loader warnings\n\n"), "{md}");
        assert!(
            md.contains(&format!("- {}, round 2: {}", esc(&key), esc(w))),
            "{md}"
        );
        let quiet = crate::testdata::sample_results();
        let md =
            String::from_utf8(ResultsMarkdown.render(&quiet).unwrap().remove(0).bytes).unwrap();
        assert!(!md.contains("## Loader warnings"));
    }

    #[test]
    fn a_multi_host_run_shows_its_hosts_and_each_loaders_part() {
        let mut r = crate::testdata::sample_results();
        r.topology = Some(crate::testdata::sample_topology());
        r.cells[0].rounds[0].loaders = vec![LoaderShare {
            endpoint: "tcp://10.0.0.2:2376 (TLS)".into(),
            connections_requested: 50,
            connections_established: 50,
            responses_2xx: 1000,
            latency_count: 1000,
            throughput_rps: 100.0,
            p50_us: 900,
            p99_us: 2_000,
            cpu_fraction: 0.4,
            window_s: 10.0,
            window_start_skew_ms: 1.5,
        }];
        let out = ResultsMarkdown.render(&r).unwrap();
        let md = String::from_utf8(out[0].bytes.clone()).unwrap();
        assert!(md.contains("## Hosts"), "{md}");
        assert!(md.contains("through its published port"), "{md}");
        assert!(
            md.contains("Server CPU and memory: Docker stats API"),
            "{md}"
        );
        assert!(md.contains("`fairground/fairground:abc`"), "{md}");
        assert!(md.contains("| 50/50 | 1000 |"), "{md}");
    }
}

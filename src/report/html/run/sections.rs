//! The run's context on its page: environment and preflight, notes, files.

use super::*;

// --------------------------------------------------------- environment ----
pub(super) fn environment(ctx: &Ctx<'_>) -> Section {
    let r = ctx.r;
    let env = &r.environment;
    let mut s = String::new();
    s.push_str(match (env.status, env.forced) {
        (CheckStatus::Fail, true) => {
            "<p class=\"banner\"><strong>† Environment NOT accepted</strong>: preflight failed and the run went ahead anyway.</p>\n"
        }
        (CheckStatus::Fail, false) => {
            "<p class=\"banner\">Preflight: <strong>fail</strong>. These results were not produced by a run that passed preflight.</p>\n"
        }
        (CheckStatus::Warn, _) => {
            "<p>Preflight: <strong class=\"warn\">warn</strong>: the results stand; the warnings below are worth knowing.</p>\n"
        }
        (CheckStatus::Pass, _) => "<p>Preflight: <strong class=\"pass\">pass</strong>.</p>\n",
    });
    if !env.checks.is_empty() {
        let mut t = Table::new(&["check", "verdict", "measured", "threshold", "remedy"]);
        for c in &env.checks {
            let status = c.status.to_string();
            t.row_with_class(
                &status,
                vec![
                    Td::text(&c.name),
                    Td::text(&status).class("verdict"),
                    Td::text(&c.measured),
                    Td::text(&c.threshold),
                    Td::text(c.remedy.as_deref().unwrap_or("")),
                ],
            );
        }
        s.push_str(&t.render());
    }
    s.push_str(
        "<h3>Limits as applied</h3>\n<p>Read back from the Docker daemon on each running server \
         container (not the profile's request).</p>\n",
    );
    let mut t = Table::new(&[
        "framework",
        "name",
        "language",
        "CPUs",
        "cpuset",
        "memory",
        "memory + swap",
        "open files",
    ]);
    for f in &r.frameworks {
        let l = f.limits.as_ref();
        t.row(vec![
            Td::text(&f.name),
            Td::text(&f.display_name),
            Td::text(&f.language),
            Td::opt(l.and_then(|l| l.cpus), |v| format!("{v}")),
            Td::text(l.and_then(|l| l.cpuset.as_deref()).unwrap_or("–")),
            Td::opt(l.and_then(|l| l.memory_bytes).map(|m| m as f64), bytes),
            Td::opt(l.and_then(|l| l.memory_swap_bytes).map(|b| b as f64), bytes),
            Td::opt(l.and_then(|l| l.nofile_soft).map(|n| n as f64), thousands),
        ]);
    }
    s.push_str(&t.render());
    let th = &r.thresholds;
    let _ = writeln!(
        s,
        "<h3>Gates applied</h3>\n<p>Rejected when connections established &lt; requested, error rate &gt; {}, \
         an OOM kill or crash, or a failed contract verification; flagged when the loader used ≥ {} of its \
         CPU or was throttled in more than {} of scheduler periods, achieved &lt; {} of a fixed target rate, \
         lagged its schedule by more than {}, the CV of req/s across rounds exceeded {}, a round was more \
         than {} from the median, or other processes used more than {:.2} CPU cores on the host.{}</p>",
        percent(th.max_error_rate),
        percent(th.loader_saturation),
        percent(th.max_loader_throttled),
        percent(th.min_rate_ratio),
        micros(th.max_schedule_lag_us as f64),
        percent(th.max_cv),
        percent(th.suspect_round),
        th.max_foreign_cores,
        esc(&th.off.sentence())
    );
    let profile = serde_json::to_string_pretty(&r.profile).unwrap_or_default();
    let _ = writeln!(
        s,
        "<details><summary>The profile as run (defaults filled in)</summary>\n<pre>{}</pre></details>",
        esc(&profile)
    );
    Section {
        id: "environment".into(),
        heading: "Environment and limits".into(),
        body: s,
    }
}

// --------------------------------------------------------------- hosts ----

/// Where a multi-host run ran (profile `hosts:`): the daemons, the path the
/// traffic took, the images carried, the clocks and each host's preflight.
pub(super) fn hosts(t: &crate::results::Topology) -> Section {
    let mut s = format!(
        "<p>{}</p>\n",
        crate::report::view::hosts_sentence(t, |c| format!("<code>{}</code>", esc(c)), esc)
    );
    if !t.images.is_empty() {
        let mut tb = Table::new(&["image", "carried to", "size", "time"]);
        for i in &t.images {
            let (size, time) = if i.skipped {
                (Td::text("already there"), Td::text(""))
            } else {
                (
                    Td::num(&crate::units::bytes(i.bytes as f64), i.bytes as f64),
                    Td::num(&format!("{:.1} s", i.seconds), i.seconds),
                )
            };
            tb.row(vec![Td::text(&i.tag), Td::text(&i.endpoint), size, time]);
        }
        s.push_str(&tb.render());
    }
    if !t.clocks.is_empty() {
        let mut tb = Table::new(&["daemon", "clock offset", "± (half the round trip)"]);
        for c in &t.clocks {
            tb.row(vec![
                Td::text(&c.endpoint),
                Td::num(&format!("{:+.1} ms", c.offset_ms), c.offset_ms),
                Td::num(
                    &format!("{:.1} ms", c.round_trip_ms / 2.0),
                    c.round_trip_ms / 2.0,
                ),
            ]);
        }
        s.push_str(&tb.render());
    }
    for p in &t.preflight {
        let _ = writeln!(
            s,
            "<h3>Preflight on <code>{}</code>: {}</h3>",
            esc(&p.endpoint),
            esc(&p.verdict)
        );
        let mut tb = Table::new(&["check", "verdict", "measured"]);
        for c in &p.checks {
            tb.row_with_class(
                &c.verdict,
                vec![
                    Td::text(&c.id),
                    Td::text(&c.verdict).class("verdict"),
                    Td::text(&c.measured),
                ],
            );
        }
        s.push_str(&tb.render());
    }
    Section {
        id: "hosts".into(),
        heading: "Hosts".into(),
        body: s,
    }
}

// --------------------------------------------------------------- notes ----

pub(super) fn notes(ctx: &Ctx<'_>) -> Section {
    let r = ctx.r;
    let mut s = String::new();
    let ordered = ctx.view.notes_in_order();
    if ordered.is_empty() {
        s.push_str("<p>No cell was flagged or rejected.</p>\n");
    } else {
        s.push_str("<ol class=\"notes\">\n");
        for (n, key) in ordered {
            let Some(c) = r.cell(key) else { continue };
            let _ = write!(
                s,
                "<li id=\"note-{n}\" value=\"{n}\" class=\"{}\"><strong>{}: {}</strong><ul>",
                c.verdict.status,
                esc(&key.to_string()),
                c.verdict.status
            );
            for reason in noted(c) {
                let _ = write!(s, "<li>{}</li>", esc(&reason.to_string()));
            }
            if let Some(rounds) = rounds_from_median(c) {
                let _ = write!(s, "<li>req/s per round: {}</li>", esc(&rounds));
            }
            s.push_str("</ul></li>\n");
        }
        s.push_str("</ol>\n");
    }
    let excluded = ctx.view.exclusions();
    if !excluded.is_empty() {
        s.push_str("<h3>Excluded by contract verification</h3>\n");
        let mut t = Table::new(&["framework", "scenario", "what verify found"]);
        for (f, e) in excluded {
            t.row(vec![
                Td::text(&f.name),
                Td::text(&e.scenario.to_string()),
                Td::text(&e.reason),
            ]);
        }
        s.push_str(&t.render());
    }
    let failed: Vec<_> = r
        .frameworks
        .iter()
        .filter(|f| f.failure.is_some())
        .collect();
    if !failed.is_empty() {
        s.push_str("<h3>Frameworks that produced no results</h3>\n");
        let mut t = Table::new(&["framework", "why"]);
        for f in failed {
            t.row(vec![
                Td::text(&f.name),
                Td::text(f.failure.as_deref().unwrap_or("")),
            ]);
        }
        s.push_str(&t.render());
    }
    if !r.skipped.is_empty() {
        s.push_str("<h3>Skipped</h3>\n");
        let mut t = Table::new(&["framework", "scenario", "reason"]);
        for k in &r.skipped {
            t.row(vec![
                Td::text(&k.framework),
                Td::text(
                    &k.scenario
                        .map(|x| x.to_string())
                        .unwrap_or_else(|| "all".into()),
                ),
                Td::text(&k.reason),
            ]);
        }
        s.push_str(&t.render());
    }
    if !r.incidents.is_empty() {
        s.push_str("<h3>Incidents</h3>\n<p>What went wrong during the run and was recorded.</p>\n");
        let mut t = Table::new(&["time (UTC)", "framework", "cell", "round", "what"]);
        for i in &r.incidents {
            t.row(vec![
                Td::text(&i.at.format("%H:%M:%S").to_string()),
                Td::text(&i.framework),
                Td::text(&i.cell.as_ref().map(|k| k.to_string()).unwrap_or_default()),
                Td::text(&i.round.map(|n| (n + 1).to_string()).unwrap_or_default()),
                Td::text(&i.what),
            ]);
        }
        s.push_str(&t.render());
    }
    let left = r.remaining();
    if !left.is_empty() {
        s.push_str(
            "<h3>Not measured</h3>\n<p>Planned but not measured (resume with \
             <code>fairground run --resume &lt;this directory&gt;</code>):</p>\n<ul>",
        );
        for k in left {
            let _ = write!(s, "<li>{}</li>", esc(&k.to_string()));
        }
        s.push_str("</ul>\n");
    }
    Section {
        id: "notes".into(),
        heading: "Notes".into(),
        body: s,
    }
}

// --------------------------------------------------------------- files ----

pub(super) fn files(ctx: &Ctx<'_>) -> Section {
    let mut s = String::from(
        "<p>Beside this page in the run directory (relative links):</p>\n<ul>\n\
         <li><a href=\"results.md\">results.md</a>: the tables to read and publish</li>\n\
         <li><a href=\"stats.md\">stats.md</a>: what each framework costs</li>\n\
         <li><a href=\"results.json\">results.json</a>: everything, every raw round</li>\n\
         <li><a href=\"results.csv\">results.csv</a>: one row per cell and round</li>\n\
         <li><a href=\"SHA256SUMS\">SHA256SUMS</a>: checksums of every file (this one included)</li>\n\
         <li><a href=\"logs/\">logs/</a>: each server container's log tail</li>\n</ul>\n",
    );
    let hgrm: Vec<String> = ctx
        .r
        .cells
        .iter()
        .filter(|c| c.summary.is_some())
        .map(|c| {
            let f = format!("hgrm/{}.hgrm", c.key.stem());
            format!("<li><a href=\"{0}\">{0}</a></li>", esc(&f))
        })
        .collect();
    if !hgrm.is_empty() {
        let _ = writeln!(
            s,
            "<details><summary>Latency histograms, HdrHistogram percentile format (ms), one per cell ({})</summary>\n<ul>\n{}\n</ul></details>",
            hgrm.len(),
            hgrm.join("\n")
        );
    }
    Section {
        id: "files".into(),
        heading: "Files".into(),
        body: s,
    }
}

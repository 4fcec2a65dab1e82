//! stats.md: what each framework costs rather than how fast it goes: memory
//! (idle, under load, peak), server CPU time per request, cold start, image
//! and binary size, app lines of code, wire bytes per response, versions and
//! the limits the daemon really applied.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::fmt::{bytes, cell as esc, micros, sig3, thousands};
use super::{Exporter, Rendered};
use crate::contract::{Protocol, Scenario};
use crate::results::{Cell, Results, Status};
use crate::stats;

/// stats.md.
pub struct StatsMarkdown;

fn opt_bytes(v: Option<u64>) -> String {
    v.map(|b| bytes(b as f64)).unwrap_or_else(|| "–".into())
}

fn cells_of<'a>(r: &'a Results, fw: &'a str) -> impl Iterator<Item = &'a Cell> + 'a {
    // Rejected cells are not valid measurements: their costs are not shown.
    r.cells
        .iter()
        .filter(move |c| c.key.framework == fw && c.verdict.status != Status::Rejected)
}

impl Exporter<Results> for StatsMarkdown {
    fn render(&self, r: &Results) -> anyhow::Result<Vec<Rendered>> {
        let mut s = String::new();
        let _ = writeln!(s, "# fairground costs: profile `{}`\n", r.profile_name);
        let _ = writeln!(
            s,
            "Run `{}`. Figures come from the server container's cgroup (memory: \
             memory.current, CPU: cpu.stat usage_usec, high-water mark: memory.peak; cgroup v1 \
             equivalents where v2 is absent), sampled every 250 ms, with CPU read at the \
             loader's window instants and memory samples kept only inside the window; and from \
             the Docker daemon. Rejected cells are left out.\n",
            r.run_id
        );
        if r.environment.forced {
            s.push_str("> **† Environment NOT accepted** (preflight failed and the run went ahead anyway: `--accept-env`, or the profile's `preflight: warn`): every figure below is marked †.\n\n");
        }
        let d = if r.environment.forced { " †" } else { "" };

        s.push_str("## Per framework\n\n");
        s.push_str(
            "- **idle memory**: after start and a settle period, before any load.\n\
             - **under load**: median over the framework's cells of each cell's median sample inside the window.\n\
             - **window peak**: the highest memory inside any measured window: the cgroup's high-water mark reset as the window opened and read as it closed (or the largest sample where the kernel does not allow a reset).\n\
             - **lifetime peak**: the container's high-water mark since it started (start-up, verification, warm-ups and earlier rounds included).\n\
             - **cold start**: container start to the first 200 on the readiness path, median of every start; `≤` when the first readiness probe already got its 200, so the server may have been ready sooner.\n\
             - **app LoC**: non-blank, non-comment lines of the framework's own app source.\n\n",
        );
        s.push_str("| framework | language | idle memory | memory under load | window peak | lifetime peak | cold start | image size | binary size | app LoC |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for f in &r.frameworks {
            let under: Vec<f64> = cells_of(r, &f.name)
                .filter_map(|c| {
                    c.summary
                        .as_ref()?
                        .memory_median_bytes
                        .as_ref()
                        .map(|a| a.median)
                })
                .collect();
            let peak = cells_of(r, &f.name)
                .filter_map(|c| c.summary.as_ref()?.memory_window_peak_bytes)
                .max();
            let lifetime = cells_of(r, &f.name)
                .filter_map(|c| c.summary.as_ref()?.memory_lifetime_peak_bytes)
                .max();
            // "≤" when some start was only bounded from above (the first
            // probe already succeeded).
            let le = if f.cold_start_upper_bounds > 0 {
                "≤ "
            } else {
                ""
            };
            let cold = stats::median(&f.cold_start_ms)
                .map(|ms| format!("{le}{} ms{d}", sig3(ms)))
                .unwrap_or_else(|| "–".into());
            let _ = writeln!(
                s,
                "| {} | {} | {}{d} | {}{d} | {}{d} | {}{d} | {cold} | {} | {} | {} |",
                f.name,
                esc(&f.language),
                opt_bytes(f.idle_memory_bytes),
                stats::median(&under)
                    .map(bytes)
                    .unwrap_or_else(|| "–".into()),
                opt_bytes(peak),
                opt_bytes(lifetime),
                opt_bytes(f.image_size_bytes),
                opt_bytes(f.binary_size_bytes),
                f.app_lines_of_code
                    .map(|n| thousands(n as f64))
                    .unwrap_or_else(|| "–".into()),
            );
        }
        s.push('\n');

        matrix(
            &mut s,
            r,
            "Server CPU time per request",
            "Server cgroup CPU time during the measured window / 2xx responses, µs, median of \
             rounds. It does not depend on how fast the loader is, so it stays comparable when \
             a cell is client-bound.",
            d,
            |c| {
                c.summary
                    .as_ref()?
                    .cpu_us_per_request
                    .as_ref()
                    .map(|a| micros(a.median))
            },
        );
        matrix(
            &mut s,
            r,
            "Memory under load",
            "Median of the 250 ms memory samples inside the measured window, median of rounds.",
            d,
            |c| {
                c.summary
                    .as_ref()?
                    .memory_median_bytes
                    .as_ref()
                    .map(|a| bytes(a.median))
            },
        );
        matrix(
            &mut s,
            r,
            "Wire bytes per response",
            "Bytes read from the socket per response (status line, headers and body), median \
             of rounds. Differences come from headers such as Date, Server and Connection.",
            d,
            |c| {
                c.summary
                    .as_ref()?
                    .wire_bytes_per_response
                    .map(|b| format!("{b:.0} B"))
            },
        );

        s.push_str("## Limits applied\n\nRead back from the Docker daemon on the running container, not copied from the profile.\n\n");
        s.push_str("| framework | CPUs | cpuset | memory | memory + swap | nofile | workers |\n|---|--:|---|--:|--:|--:|---|\n");
        for f in &r.frameworks {
            match &f.limits {
                Some(l) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {} | {} |",
                        f.name,
                        l.cpus.map_or_else(|| "unlimited".into(), sig3),
                        l.cpuset.as_deref().unwrap_or("any"),
                        l.memory_bytes
                            .map_or_else(|| "unlimited".into(), |m| bytes(m as f64)),
                        l.memory_swap_bytes
                            .map(|b| if b < 0 {
                                "unlimited".into()
                            } else {
                                bytes(b as f64)
                            })
                            .unwrap_or_else(|| "–".into()),
                        l.nofile_soft
                            .map_or_else(|| "–".into(), |n| thousands(n as f64)),
                        esc(&f.workers)
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        "| {} | – | – | – | – | – | {} |",
                        f.name,
                        esc(&f.workers)
                    );
                }
            }
        }
        s.push('\n');

        s.push_str("## Versions\n\nAs installed in each image (/fairground/versions.txt).\n\n| framework | component | version | image |\n|---|---|---|---|\n");
        for f in &r.frameworks {
            let image = f.image_id.as_deref().map(short_id).unwrap_or("–");
            if f.versions.is_empty() {
                let _ = writeln!(s, "| {} | – | – | {image} |", f.name);
            }
            for (component, version) in &f.versions {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {image} |",
                    f.name,
                    esc(component),
                    esc(version)
                );
            }
        }
        s.push('\n');
        Ok(vec![Rendered {
            path: PathBuf::from("stats.md"),
            bytes: s.into_bytes(),
        }])
    }
}

fn short_id(id: &str) -> &str {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    &hex[..hex.len().min(12)]
}

/// A framework × (scenario, concurrency) table of one per-cell figure.
fn matrix(
    s: &mut String,
    r: &Results,
    title: &str,
    how: &str,
    dagger: &str,
    value: impl Fn(&Cell) -> Option<String>,
) {
    let mut cols: Vec<(Scenario, Protocol, u32, Option<u64>)> = Vec::new();
    for k in r.plan.iter().chain(r.cells.iter().map(|c| &c.key)) {
        let col = (k.scenario, k.protocol, k.concurrency, k.rate);
        if !cols.contains(&col) {
            cols.push(col);
        }
    }
    let _ = writeln!(s, "## {title}\n\n{how}\n");
    s.push_str("| framework |");
    for (sc, p, c, rate) in &cols {
        let what = if p.is_http1() {
            sc.to_string()
        } else {
            format!("{sc} {p}")
        };
        match rate {
            Some(rate) => {
                let _ = write!(
                    s,
                    " {what} c={} @{}/s |",
                    thousands(f64::from(*c)),
                    thousands(*rate as f64)
                );
            }
            None => {
                let _ = write!(s, " {what} c={} |", thousands(f64::from(*c)));
            }
        }
    }
    s.push_str("\n|---|");
    s.push_str(&"--:|".repeat(cols.len()));
    s.push('\n');
    for f in &r.frameworks {
        let _ = write!(s, "| {} |", f.name);
        for col in &cols {
            let text = r
                .cells
                .iter()
                .find(|c| {
                    c.key.framework == f.name
                        && (
                            c.key.scenario,
                            c.key.protocol,
                            c.key.concurrency,
                            c.key.rate,
                        ) == *col
                })
                .map(|c| match c.verdict.status {
                    Status::Rejected => "✗".to_string(),
                    _ => value(c)
                        .map(|v| format!("{v}{dagger}"))
                        .unwrap_or_else(|| "–".into()),
                })
                .unwrap_or_else(|| "–".into());
            let _ = write!(s, " {text} |");
        }
        s.push('\n');
    }
    s.push('\n');
}

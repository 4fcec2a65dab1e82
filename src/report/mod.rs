//! Reports: one exporter per output format, each turning [`Results`] into
//! bytes (so each is snapshot-tested), and the writer that lays a run
//! directory out: results.md, stats.md, report.html, results.json,
//! results.csv, hgrm/, results.prom, results.junit.xml, SHA256SUMS, plus
//! the `output/latest` symlink.
//!
//! Exporters only render what results.json holds; they measure and judge
//! nothing, and never touch the disk (only [`write_run`] does).

mod context;
mod csv;
pub mod fmt;
mod hgrm;
pub mod html;
mod json;
mod junit;
mod markdown;
mod openmetrics;
mod stats_md;
#[cfg(test)]
mod survivors;
mod view;

use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::results::Results;

pub use self::csv::CsvExporter;
pub use self::hgrm::{hgrm_text, HgrmExporter};
pub use self::html::{HtmlReport, REPORT_HTML};
pub use self::json::JsonExporter;
pub use self::junit::{junit_xml, JunitExporter, JUNIT_FILE};
pub use self::markdown::ResultsMarkdown;
pub use self::openmetrics::{openmetrics_text, OpenMetricsExporter, PROM_FILE};
pub use self::stats_md::StatsMarkdown;

/// Name of the checksum file in a run directory (`sha256sum -c` format).
pub const SUMS_FILE: &str = "SHA256SUMS";

pub use crate::export::{Exporter, Rendered};

/// Every exporter a run writes, in writing order.
pub fn exporters() -> Vec<Box<dyn Exporter<Results>>> {
    vec![
        Box::new(JsonExporter),
        Box::new(ResultsMarkdown),
        Box::new(StatsMarkdown),
        Box::new(CsvExporter),
        Box::new(HgrmExporter),
        Box::new(HtmlReport),
        Box::new(OpenMetricsExporter),
        Box::new(JunitExporter),
    ]
}

/// Write every report of `results` into `dir`, then SHA256SUMS over all of
/// them. Returns the files written (relative paths), SHA256SUMS last.
pub fn write_run(dir: &Path, results: &Results) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for exporter in exporters() {
        files.extend(exporter.render(results)?);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let mut sums = String::new();
    for f in &files {
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        write_atomic(&path, &f.bytes)?;
        sums.push_str(&format!(
            "{}  {}\n",
            hex::encode(Sha256::digest(&f.bytes)),
            f.path.display()
        ));
    }
    // Container logs are evidence too: the run writes them into logs/ as
    // servers stop, so they are hashed from disk.
    for log in log_files(dir)? {
        let bytes = std::fs::read(dir.join(&log))
            .with_context(|| format!("cannot read {}", dir.join(&log).display()))?;
        sums.push_str(&format!(
            "{}  {}\n",
            hex::encode(Sha256::digest(&bytes)),
            log.display()
        ));
    }
    write_atomic(&dir.join(SUMS_FILE), sums.as_bytes())?;
    let mut written: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
    written.push(PathBuf::from(SUMS_FILE));
    Ok(written)
}

/// Files under `dir/logs/`, relative to `dir`, sorted (none when absent).
fn log_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let logs = dir.join(LOGS_DIR);
    let entries = match std::fs::read_dir(&logs) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", logs.display())),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            found.push(Path::new(LOGS_DIR).join(entry.file_name()));
        }
    }
    found.sort();
    Ok(found)
}

/// Folder of a run directory that holds each server container's log tail.
pub const LOGS_DIR: &str = "logs";

/// Name of a run directory: `<UTC timestamp>-<profile>`, e.g.
/// `20261129T230000Z-standard`. Sorts by time.
pub fn run_dir_name(started: DateTime<Utc>, profile: &str) -> String {
    format!("{}-{profile}", started.format("%Y%m%dT%H%M%SZ"))
}

/// Point `root/latest` at `root/<name>` (a relative symlink, replaced
/// atomically so a reader never finds it missing).
pub fn link_latest(root: &Path, name: &str) -> anyhow::Result<()> {
    let link = root.join("latest");
    let tmp = root.join(format!(".latest-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(name, &tmp)
        .with_context(|| format!("cannot create symlink {}", tmp.display()))?;
    std::fs::rename(&tmp, &link)
        .with_context(|| format!("cannot point {} at {name}", link.display()))?;
    Ok(())
}

/// Replace `path` with `bytes` so that a reader (or a crash) sees either the
/// old file or the new one, never a mix: write a temporary file in the same
/// directory, flush it to disk, then rename it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".fairground-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    #[test]
    fn writes_every_file_and_checksums_that_verify() {
        let tmp = tempfile::tempdir().unwrap();
        let r = sample_results();
        let files = write_run(tmp.path(), &r).unwrap();
        for name in [
            "results.md",
            "stats.md",
            "report.html",
            "results.json",
            "results.csv",
            PROM_FILE,
            JUNIT_FILE,
            SUMS_FILE,
        ] {
            assert!(
                files.contains(&PathBuf::from(name)),
                "{name} missing from {files:?}"
            );
        }
        assert!(files.iter().any(|f| f.starts_with("hgrm")));
        let sums = std::fs::read_to_string(tmp.path().join(SUMS_FILE)).unwrap();
        assert_eq!(sums.lines().count(), files.len() - 1);
        for line in sums.lines() {
            let (hash, path) = line.split_once("  ").unwrap();
            let bytes = std::fs::read(tmp.path().join(path)).unwrap();
            assert_eq!(hash, hex::encode(Sha256::digest(&bytes)), "{path}");
        }
    }

    #[test]
    fn container_logs_are_covered_by_the_checksums() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join(LOGS_DIR)).unwrap();
        std::fs::write(tmp.path().join("logs/fg-x-hyper-1.log"), "started\n").unwrap();
        write_run(tmp.path(), &sample_results()).unwrap();
        let sums = std::fs::read_to_string(tmp.path().join(SUMS_FILE)).unwrap();
        let line = sums
            .lines()
            .find(|l| l.ends_with("  logs/fg-x-hyper-1.log"))
            .unwrap_or_else(|| panic!("log not in SHA256SUMS:\n{sums}"));
        assert!(line.starts_with(&hex::encode(Sha256::digest(b"started\n"))));
    }

    #[test]
    fn latest_points_at_the_newest_run() {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["20260101T000000Z-a", "20260102T000000Z-a"] {
            std::fs::create_dir(tmp.path().join(name)).unwrap();
            link_latest(tmp.path(), name).unwrap();
        }
        let target = std::fs::read_link(tmp.path().join("latest")).unwrap();
        assert_eq!(target, PathBuf::from("20260102T000000Z-a"));
        assert_eq!(
            run_dir_name(sample_results().started_at, "standard"),
            "20261129T230000Z-standard"
        );
    }

    /// Text that comes from framework folders and containers, made to end a
    /// Markdown cell and row, close an HTML attribute and open an element.
    const HOSTILE: &str =
        "<script>alert(1)</script> \"q\" 'a' | pipe\nnewline & amp <img src=x onerror=alert(2)>";

    /// The sample run with HOSTILE in every field a framework or a container
    /// writes: manifest fields, versions read from the image, the failure of
    /// a framework, a verify exclusion, a skip and an incident.
    pub(crate) fn hostile_results() -> Results {
        let mut r = sample_results();
        let name = r.frameworks[0].name.clone();
        let f = r.framework_mut(&name);
        f.display_name = HOSTILE.into();
        f.language = HOSTILE.into();
        f.workers = HOSTILE.into();
        f.versions.insert("lib".into(), HOSTILE.into());
        let failed = r.framework_mut("broken");
        failed.failure = Some(HOSTILE.into());
        r.skipped.push(crate::results::Skipped {
            framework: name.clone(),
            scenario: None,
            protocol: None,
            reason: HOSTILE.into(),
        });
        r.incidents.push(crate::results::Incident {
            at: r.started_at,
            framework: name,
            cell: None,
            round: None,
            what: HOSTILE.into(),
        });
        r
    }

    /// The first of HOSTILE's tags in `text` that is not backslash-escaped:
    /// what a Markdown renderer would pass on as HTML.
    fn raw_tag(text: &str) -> Option<&str> {
        ["<script", "</script", "<img"].iter().find_map(|tag| {
            text.match_indices(tag)
                .find(|(at, _)| !text[..*at].ends_with('\\'))
                .map(|(at, _)| text[at..].lines().next().unwrap_or(""))
        })
    }

    #[test]
    fn text_from_frameworks_and_containers_comes_out_inert() {
        let r = hostile_results();
        // results.md: no tag a renderer would pass on, and every table row
        // has its header's number of cells (no `|` or newline got through).
        let md = String::from_utf8(ResultsMarkdown.render(&r).unwrap().remove(0).bytes).unwrap();
        assert!(
            md.contains("alert(1)"),
            "the hostile text is not in results.md at all"
        );
        if let Some(tag) = raw_tag(&md) {
            panic!("results.md passes raw HTML on: {tag}");
        }
        let cells = |line: &str| {
            let b = line.as_bytes();
            (0..b.len())
                .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
                .count()
        };
        let mut header = None;
        for line in md.lines() {
            if line.starts_with('|') {
                let n = cells(line);
                let want = *header.get_or_insert(n);
                assert_eq!(
                    n, want,
                    "a results.md row has {n} cell borders, its table {want}: {line}"
                );
            } else {
                header = None;
                assert!(
                    !line.starts_with("newline & amp"),
                    "a newline in a cell broke a results.md row"
                );
            }
        }
        // report.html: the text is there, escaped; nothing of it is markup.
        let html = HtmlReport.render(&r).unwrap().remove(0).bytes;
        let html = String::from_utf8(html).unwrap();
        assert!(
            html.contains("&lt;script&gt;alert(1)"),
            "the hostile text is not in report.html escaped"
        );
        for raw in ["<script>alert", "<img src=x", "\"q\""] {
            assert!(!html.contains(raw), "report.html carries {raw:?} raw");
        }
        // compare.html of the hostile run against the sample.
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a.json"), tmp.path().join("b.json"));
        let cmp = crate::compare::compare_runs((&a, &sample_results()), (&b, &r)).unwrap();
        let page = String::from_utf8(crate::compare::to_html(&cmp).unwrap()).unwrap();
        for raw in ["<script>alert", "<img src=x"] {
            assert!(!page.contains(raw), "compare.html carries {raw:?} raw");
        }
        let md = String::from_utf8(crate::compare::to_markdown(&cmp)).unwrap();
        assert!(
            raw_tag(&md).is_none(),
            "compare's Markdown passes raw HTML on"
        );
    }
}

//! report.html in a real browser: a real run (the plainfw fixture, one
//! framework flagged client-bound by a loader held to a tenth of a CPU, one
//! that drops connections beyond 6 so its 8-connection cells are rejected)
//! written by `fairground run`, then its page rendered by headless
//! Chromium from file:// inside a fresh network namespace. Checked: no
//! console message and no network request (Chromium's stderr and its own
//! net log, both first shown to catch a canary page's message and
//! request), every chart the run calls for present and drawn, flagged and
//! rejected cells marked with their reasons, and a screenshot that is not
//! blank.
//!
//! Only traffic: the run's containers on their own internal network;
//! Chromium runs in a network namespace with nothing but a downed loopback.
//! Like the other Docker tests it does not take the shared measurement lock
//! itself (a caller holding it, `flock /tmp/fairground-docker.lock cargo
//! test …`, would deadlock it); wrap it when the machine is shared.

mod docker_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use docker_support::{docker_or_skip, plainfw_variant, refserve, root};
use fairground::results::{self, Cell, Results, Status};

/// Whether the browser test can run here: Chromium installed and a network
/// namespace available to put it in. With CI=true both must be there.
fn browser_or_skip(test: &str) -> Option<Vec<String>> {
    let why = if Command::new("chromium")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
    {
        // Root can make a network namespace directly; anyone else through
        // a user namespace.
        let ok = |args: &[&str]| {
            Command::new("unshare")
                .args(args)
                .arg("true")
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        if ok(&["--net"]) {
            return Some(vec!["unshare".into(), "--net".into()]);
        }
        if ok(&["--net", "--map-root-user"]) {
            return Some(vec![
                "unshare".into(),
                "--net".into(),
                "--map-root-user".into(),
            ]);
        }
        "cannot create a network namespace (unshare --net)".to_string()
    } else {
        "chromium is not installed (make deps installs it)".to_string()
    };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: CI=true but {why}");
    }
    eprintln!("\n!!! SKIPPING {test}: {why} !!!\n");
    None
}

/// Run a small profile for real; the run directory.
fn real_run(tmp: &Path) -> PathBuf {
    plainfw_variant(tmp, "plainfw", &[]);
    plainfw_variant(tmp, "dropper", &[("PLAINFW_MAX_OPEN", "6")]);
    // The reference server echoing WebSocket messages: its ws-echo-64
    // columns are drawn in msg/s (the plainfw variants skip them).
    refserve(tmp, "wsref", "[ws-echo]", "[http1]", &[]);
    // Two levels, so the page also draws throughput against concurrency;
    // a loader held to a tenth of a CPU is throttled (flagged) against a
    // fast server; 8 connections to a server that keeps 6 are rejected.
    // Three rounds, so the 4-connection column ranks its two frameworks
    // and every figure has its interval.
    let profile = tmp.join("browser.yaml");
    std::fs::write(
        &profile,
        "description: \"report.html browser test\"\n\
         frameworks: [plainfw, dropper, wsref]\nscenarios: [plaintext, ws-echo-64]\nconcurrency: [4, 8]\n\
         warmup: 1s\nduration: 2s\nrounds: 3\nrestart_between_rounds: false\n\
         load: {threads: 1}\n\
         server: {cpus: 1, memory: 128MiB, nofile: 16384}\n\
         loader: {cpus: 0.1, memory: 256MiB, nofile: 16384}\n\
         idle_settle: 1s\nreadiness_timeout: 30s\nthresholds: {preflight: warn}\n",
    )
    .unwrap();
    let out = tmp.join("output");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fairground"));
    cmd.args(["run", "--profile"])
        .arg(&profile)
        .arg("--frameworks")
        .arg(tmp.join("frameworks"))
        .arg("--output")
        .arg(&out)
        .current_dir(root());
    if std::env::var_os("FAIRGROUND_STATIC_BIN").is_none() {
        let bin = fairground::docker::images::locate_static_binary(&root()).expect("make static");
        cmd.env("FAIRGROUND_STATIC_BIN", bin);
    }
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "the run failed:\n{stderr}");
    out.join("latest").canonicalize().expect("output/latest")
}

/// Run Chromium headless on `page` inside a fresh network namespace:
/// the serialized DOM, stderr (console messages land there) and the net
/// log's path. Bounded in time.
fn chromium(
    ns: &[String],
    page: &Path,
    work: &Path,
    screenshot: Option<&Path>,
) -> (String, String, PathBuf) {
    let net_log = work.join(format!(
        "{}.netlog.json",
        page.file_stem().unwrap().to_string_lossy()
    ));
    let profile = work.join("chromium-profile");
    let _ = std::fs::remove_dir_all(&profile);
    let mut cmd = Command::new(&ns[0]);
    cmd.args(&ns[1..]).arg("chromium").args([
        "--headless",
        // Chromium refuses its sandbox as root; the network namespace is
        // what contains it here.
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,3200",
        "--dump-dom",
    ]);
    cmd.arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", net_log.display()));
    if let Some(png) = screenshot {
        cmd.arg(format!("--screenshot={}", png.display()));
    }
    cmd.arg(format!("file://{}", page.display()))
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start chromium");
    let o = wait_bounded(child, Duration::from_secs(120));
    assert!(
        o.status.success(),
        "chromium failed on {}: {}",
        page.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        net_log,
    )
}

fn wait_bounded(mut child: std::process::Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    // Read the pipes on threads so a chatty browser cannot block on them.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).ok();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).ok();
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

/// URLs of requests the page itself made, from Chromium's net log.
/// Chromium's own background requests carry no initiator ("not an
/// origin"); a document's requests carry its origin and a network
/// isolation key naming its site, file:// for a page opened from disk.
fn page_requests(net_log: &Path) -> Vec<String> {
    let text =
        std::fs::read_to_string(net_log).unwrap_or_else(|e| panic!("{}: {e}", net_log.display()));
    let log: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", net_log.display()));
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .expect("net log names URL_REQUEST_START_JOB");
    log["events"]
        .as_array()
        .expect("net log events")
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start_job))
        .filter_map(|e| {
            let p = &e["params"];
            let url = p["url"].as_str()?;
            let initiator = p["initiator"].as_str().unwrap_or("");
            let nik = p["network_isolation_key"].as_str().unwrap_or("");
            (initiator != "not an origin" || nik.contains("file://")).then(|| url.to_string())
        })
        .collect()
}

/// Console messages (any level) Chromium logged for the page. Chromium's
/// own internal pages (chrome://) log to the same stream, e.g. "Slow
/// network is detected" inside the network namespace; those are not the
/// page's.
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .filter(|l| !l.contains("source: chrome://") && !l.contains("source: devtools://"))
        .collect()
}

/// Text as a browser serialises it in its DOM: `&`, `<` and `>` escaped.
fn dom_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text made to end a Markdown cell and row, close an HTML attribute and
/// open elements whose scripts, if they ever ran, would log to the console.
const HOSTILE: &str =
    "<script>console.log(\"fairground-hostile-script\")</script> \"q\" 'a' | pipe\n\
     <img src=x onerror=\"console.log('fairground-hostile-img')\"><b onmouseover=x>b</b>";

/// The run of `dir` again with HOSTILE in every field a framework folder or
/// a container writes (names shown beside the framework, a failure, a
/// verify exclusion, a skip, an incident), its reports rewritten by
/// `fairground report` into a new directory.
fn hostile_copy(dir: &Path, into: &Path) -> PathBuf {
    let text = std::fs::read_to_string(dir.join(results::RESULTS_FILE)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let h = serde_json::Value::String(HOSTILE.into());
    for f in v["frameworks"].as_array_mut().unwrap() {
        f["display_name"] = h.clone();
        f["language"] = h.clone();
        f["failure"] = h.clone();
    }
    let at = v["started_at"].clone();
    v["incidents"] = serde_json::json!([{
        "at": at, "framework": HOSTILE, "cell": null, "round": null, "what": HOSTILE
    }]);
    v["skipped"] = serde_json::json!([{
        "framework": HOSTILE, "scenario": null, "reason": HOSTILE
    }]);
    std::fs::create_dir_all(into).unwrap();
    std::fs::write(
        into.join(results::RESULTS_FILE),
        serde_json::to_string(&v).unwrap(),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .arg("report")
        .arg(into)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "fairground report of the hostile copy failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    into.to_path_buf()
}

/// The markup of the `<svg>` with `id`, if present.
fn svg_of<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let start = dom.find(&format!("<svg id=\"{id}\""))?;
    let end = dom[start..].find("</svg>")? + start;
    Some(&dom[start..end])
}

/// The `<g>` of the row or series labelled `label` in `svg`.
fn row_of<'a>(svg: &'a str, label: &str) -> Option<&'a str> {
    let at = svg.find(&format!("data-label=\"{label}\""))?;
    let start = svg[..at].rfind("<g ")?;
    let end = svg[at..].find("</g>")? + at;
    Some(&svg[start..end])
}

/// Every chart id the page must have for `r`.
fn expected_charts(r: &Results) -> Vec<String> {
    let mut ids = BTreeSet::new();
    let mut levels: BTreeSet<(String, u32)> = BTreeSet::new();
    for c in &r.cells {
        let col = c.key.stem()[c.key.framework.len() + 1..].to_string();
        let head = if c.key.rate.is_some() {
            "latency"
        } else {
            "rps"
        };
        for kind in [head, "spectrum", "cpu", "memory"] {
            ids.insert(format!("{kind}-{col}"));
        }
        if !c.rounds.is_empty() {
            ids.insert(format!("timeline-{}", c.key.stem()));
        }
        levels.insert((c.key.scenario.to_string(), c.key.concurrency));
    }
    let scenarios: BTreeSet<&String> = levels.iter().map(|(s, _)| s).collect();
    for s in scenarios {
        if levels.iter().filter(|(x, _)| x == s).count() > 1 {
            ids.insert(format!("scaling-{s}"));
        }
    }
    ids.into_iter().collect()
}

/// The row of cell `c` in its column's req/s chart.
fn rps_row<'a>(dom: &'a str, c: &Cell) -> &'a str {
    let col = &c.key.stem()[c.key.framework.len() + 1..];
    let svg = svg_of(dom, &format!("rps-{col}")).unwrap_or_else(|| panic!("rps-{col} missing"));
    row_of(svg, &c.key.framework).unwrap_or_else(|| panic!("{} has no row in rps-{col}", c.key))
}

fn cell(r: &Results, status: Status) -> Vec<&Cell> {
    r.cells
        .iter()
        .filter(|c| c.verdict.status == status)
        .collect()
}

#[test]
fn console_lines_are_the_pages_own() {
    let stderr = "[1:1:1130/113231.256331:INFO:CONSOLE:574] \"Slow network is detected.\", source: chrome://resources/x.js (574)\n\
                  [1:1:1130/113231.256331:INFO:CONSOLE:12] \"Uncaught TypeError: x\", source: file:///tmp/run/report.html (12)\n\
                  [1:1:1130/113231.256331:ERROR:dbus/bus.cc:405] Failed to connect to the bus";
    let lines = console_lines(stderr);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("report.html"));
}

#[test]
fn report_html_of_a_real_run_renders_in_chromium_offline_with_every_chart_and_mark() {
    let test = "report_html_of_a_real_run_renders_in_chromium_offline_with_every_chart_and_mark";
    if !docker_or_skip(test) {
        return;
    }
    let Some(ns) = browser_or_skip(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("browser");
    std::fs::create_dir_all(&work).unwrap();

    // The detectors first: a page that fetches and logs must show up in
    // the net log and the console lines, or finding nothing would prove
    // nothing.
    let canary = work.join("canary.html");
    std::fs::write(
        &canary,
        "<!DOCTYPE html><title>canary</title><img src=\"http://127.0.0.1:9/canary.png\">\
         <script>console.log(\"fairground-canary\")</script>",
    )
    .unwrap();
    let (_, stderr, log) = chromium(&ns, &canary, &work, None);
    let seen = page_requests(&log);
    assert!(
        seen.iter().any(|u| u.contains("canary.png")),
        "the net log check misses a page's request: {seen:?}"
    );
    assert!(
        console_lines(&stderr)
            .iter()
            .any(|l| l.contains("fairground-canary")),
        "the console check misses a page's message:\n{stderr}"
    );

    let dir = real_run(tmp.path());
    let text = std::fs::read_to_string(dir.join(results::RESULTS_FILE)).unwrap();
    let r = results::from_json(&text, "results.json").unwrap();
    let page = dir.join("report.html");
    let shot = work.join("report.png");
    let (dom, stderr, log) = chromium(&ns, &page, &work, Some(&shot));

    // Loaded from file://, the script ran to its end, nothing was logged
    // to the console and nothing was requested.
    assert!(
        dom.contains("<html lang=\"en\" class=\"js\">"),
        "the page's script did not run to its end:\n{}",
        &dom[..dom.len().min(500)]
    );
    let console = console_lines(&stderr);
    assert!(console.is_empty(), "console messages: {console:#?}");
    let requests = page_requests(&log);
    assert!(requests.is_empty(), "the page made requests: {requests:?}");

    // Every chart the run calls for, each with something drawn in it.
    for id in expected_charts(&r) {
        let svg = svg_of(&dom, &id).unwrap_or_else(|| panic!("chart {id} missing"));
        let drawn = svg.matches("<rect").count()
            + svg.matches("<polyline").count()
            + svg.matches("<circle").count();
        assert!(
            svg.contains("<g class=\"row ") || svg.contains("<g class=\"series"),
            "chart {id} has no rows or series"
        );
        assert!(drawn > 0, "chart {id} is empty");
    }

    // The WebSocket column's chart counts messages: msg/s, not req/s.
    let ws = r
        .cells
        .iter()
        .find(|c| c.key.scenario.is_websocket())
        .expect("the run has a WebSocket cell");
    let col = &ws.key.stem()[ws.key.framework.len() + 1..];
    let svg = svg_of(&dom, &format!("rps-{col}")).unwrap_or_else(|| panic!("rps-{col} missing"));
    assert!(
        svg.contains("msg/s") && !svg.contains("req/s"),
        "rps-{col} is not in msg/s: {}",
        &svg[..svg.len().min(600)]
    );

    // Flagged cells: ⚑ with the note number, the reason in the tooltip.
    let flagged = cell(&r, Status::Flagged);
    assert!(
        flagged.iter().any(|c| c.key.framework == "plainfw"),
        "plainfw behind a 0.1-CPU loader should be flagged: {:?}",
        r.cells
            .iter()
            .map(|c| (&c.key, &c.verdict))
            .collect::<Vec<_>>()
    );
    for c in &flagged {
        let row = rps_row(&dom, c);
        assert!(row.contains("class=\"row flagged\""), "{row}");
        assert!(row.contains('⚑'), "{row}");
        // In the cell's own words: a WebSocket cell's reasons speak of messages.
        let reason = c
            .key
            .scenario
            .in_own_words(&c.verdict.reasons[0].to_string());
        let reason = dom_text(&reason);
        assert!(row.contains(&reason), "tooltip lacks {reason}: {row}");
    }
    // Rejected cells: no bar, the reason in its place.
    let rejected = cell(&r, Status::Rejected);
    assert!(
        rejected
            .iter()
            .any(|c| c.key.framework == "dropper" && c.key.concurrency == 8),
        "dropper at 8 connections should be rejected: {:?}",
        r.cells
            .iter()
            .map(|c| (&c.key, &c.verdict))
            .collect::<Vec<_>>()
    );
    for c in &rejected {
        let row = rps_row(&dom, c);
        assert!(row.contains("class=\"row rejected\""), "{row}");
        assert!(row.contains('✗') && !row.contains("<rect"), "{row}");
    }
    // Rank groups and precision: every ranked cell's bar carries its group
    // (ties marked `#1–2`) and its ±, in its column's rank order, and the
    // summary shows the interval beside the figure.
    // Client-bound cells (plainfw behind its starved loader) read only a
    // floor: no rank group, the figure drawn as `≥`.
    let client_bound = |c: &Cell| {
        c.verdict.reasons.iter().any(|x| {
            matches!(
                x,
                fairground::results::Reason::LoaderSaturated { .. }
                    | fairground::results::Reason::LoaderThrottled { .. }
            )
        })
    };
    // (A rejected cell has no figure to draw, floor or not.)
    let floors: Vec<&Cell> = r
        .cells
        .iter()
        .filter(|c| client_bound(c) && c.verdict.status != Status::Rejected)
        .collect();
    assert!(
        !floors.is_empty(),
        "plainfw behind a 0.1-CPU loader should be client-bound: {:?}",
        r.cells
            .iter()
            .map(|c| (&c.key, &c.verdict))
            .collect::<Vec<_>>()
    );
    for c in &floors {
        assert!(c.rank.is_none(), "a floor was ranked: {:?}", c.key);
        let row = rps_row(&dom, c);
        assert!(
            row.contains('≥'),
            "a client-bound bar is not drawn as a floor: {row}"
        );
    }
    let ranked: Vec<&Cell> = r.cells.iter().filter(|c| c.rank.is_some()).collect();
    for c in &ranked {
        let row = rps_row(&dom, c);
        let label = c.rank.as_ref().map(|g| g.label()).unwrap_or_default();
        assert!(row.contains(&label), "bar lacks its rank {label}: {row}");
        assert!(row.contains('±'), "bar lacks its precision: {row}");
    }
    assert!(
        dom.contains("<span class=\"ci\""),
        "the summary shows no interval"
    );
    for n in 1..=(flagged.len() + rejected.len()) {
        assert!(
            dom.contains(&format!("id=\"note-{n}\"")),
            "note {n} missing"
        );
    }

    // The screenshot is a page, not a blank: many colours, and the
    // flagged bars' orange among them.
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("screenshot written"),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let mut colours = BTreeSet::new();
    let mut orange = 0usize;
    for p in buf[..info.buffer_size()].chunks(px) {
        colours.insert((p[0], p[1], p[2]));
        if (p[0], p[1], p[2]) == (0xE6, 0x9F, 0x00) {
            orange += 1;
        }
    }
    assert!(
        colours.len() > 100,
        "screenshot {} looks blank: {} colours",
        shot.display(),
        colours.len()
    );
    assert!(
        orange > 200,
        "no flagged bar in the screenshot ({orange} px)"
    );

    // compare.html of two frameworks of the run, drawn the same way: also
    // offline, silent, every metric's ratio chart drawn, and the cell the
    // dropper lost listed as NEW rejecting what BASE measured.
    let cmp_page = work.join("compare.html");
    let o = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .arg("compare")
        .arg(format!("{}:plainfw", dir.display()))
        .arg(format!("{}:dropper", dir.display()))
        .arg("--html")
        .arg(&cmp_page)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "compare failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (dom, stderr, log) = chromium(&ns, &cmp_page, &work, None);
    assert!(
        dom.contains("<html lang=\"en\" class=\"js\">"),
        "compare.html's script did not run"
    );
    let console = console_lines(&stderr);
    assert!(
        console.is_empty(),
        "compare.html console messages: {console:#?}"
    );
    let requests = page_requests(&log);
    assert!(
        requests.is_empty(),
        "compare.html made requests: {requests:?}"
    );
    for id in ["chart-m-req-s", "chart-m-p99", "chart-m-CPU-req"] {
        let svg = svg_of(&dom, id).unwrap_or_else(|| panic!("compare chart {id} missing"));
        assert!(
            svg.contains("<g class=\"row "),
            "compare chart {id} has no rows"
        );
        // A ratio is drawn, unless the rounds were all measured on a busy
        // host (left out): then the row says inconclusive.
        assert!(
            svg.contains("<circle") || svg.contains("class=\"row unknown\""),
            "compare chart {id} draws no ratio and says nothing"
        );
    }
    assert!(
        dom.contains("NEW rejects") && dom.contains("<section id=\"not-compared\">"),
        "the dropper's rejected cell is not listed"
    );

    // Text from framework folders and containers comes out inert: the run
    // again with markup in every such field, its report.html and a
    // compare.html of it rendered: nothing logged (the markup's scripts
    // would log), no element of it in the DOM, the text shown as text.
    let hostile = hostile_copy(&dir, &tmp.path().join("hostile"));
    let (dom, stderr, log) = chromium(&ns, &hostile.join("report.html"), &work, None);
    assert!(
        dom.contains("<html lang=\"en\" class=\"js\">"),
        "the hostile page's script did not run to its end"
    );
    let console = console_lines(&stderr);
    assert!(
        console.is_empty(),
        "hostile report.html logged: {console:#?}"
    );
    assert!(
        page_requests(&log).is_empty(),
        "hostile report.html made requests"
    );
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "a script element beside the page's own"
    );
    for raw in ["<img src=\"x\"", "<img src=x", "<b onmouseover"] {
        assert!(!dom.contains(raw), "{raw} became an element of report.html");
    }
    assert!(
        dom.contains("&lt;script&gt;console.log("),
        "the hostile text is not shown as text"
    );
    let md = std::fs::read_to_string(hostile.join("results.md")).unwrap();
    // Markdown passes raw HTML on; an escaped `\<` does not open a tag.
    let hostile_lines: Vec<&str> = md
        .lines()
        .filter(|l| l.contains("fairground-hostile"))
        .collect();
    assert!(
        !hostile_lines.is_empty(),
        "results.md shows none of the hostile fields"
    );
    for line in hostile_lines {
        let unescaped = line.replace("\\<", "");
        assert!(
            !unescaped.contains("<script") && !unescaped.contains("<img"),
            "results.md passes a tag on: {line}"
        );
    }
    let cmp_page = work.join("compare-hostile.html");
    let o = Command::new(env!("CARGO_BIN_EXE_fairground"))
        .arg("compare")
        .arg(format!("{}:plainfw", hostile.display()))
        .arg(format!("{}:dropper", hostile.display()))
        .arg("--html")
        .arg(&cmp_page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (dom, stderr, _) = chromium(&ns, &cmp_page, &work, None);
    let console = console_lines(&stderr);
    assert!(
        console.is_empty(),
        "hostile compare.html logged: {console:#?}"
    );
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "compare.html: a script element beside its own"
    );
}

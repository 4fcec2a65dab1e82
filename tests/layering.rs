//! The stages of `src/` as layers: every top-level module may use only the
//! modules listed before it in [`LAYERS`], so the data flow reads top to
//! bottom and there is no arrow back up (and so no cycle between stages).
//! The test reads every `crate::…` path in `src/` (production code;
//! comments aside) and fails naming each upward one with its file and line.
//! Test code (`#[cfg(test)]` modules and the files they declare) may use
//! any layer, as a workspace crate's tests may through dev-dependencies.
//!
//! `cargo test --test layering -- --nocapture` prints the import graph.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Bottom first. A module may use any module above it in this list, never
/// one below it. docs/architecture.md describes each layer.
const LAYERS: &[&str] = &[
    // Foundations: no knowledge of any stage.
    "units",
    "stats",
    "exit",
    "export",
    "markup",
    "contract",
    "tls",
    // What the machine is.
    "host",
    // What runs inside containers: the loader, the reference server, the prober.
    "roles",
    // What is asked for.
    "framework",
    "profile",
    // What will be run: cells, rounds, order, container specs.
    "plan",
    // The engine: cgroup reading, images, containers, networks; the environment.
    "probe",
    "docker",
    "preflight",
    // What was measured, and its judgement.
    "results",
    "judge",
    "testdata",
    // What is shown.
    "report",
    "verify",
    "compare",
    "history",
    // The run that ties them together.
    "bench",
    // The front door.
    "cli",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src/` belongs to (`None` for the
/// crate roots, lib.rs and main.rs).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// `text` with comments and test-only code blanked out (same length, same
/// lines): `//` comments, and every item under `#[cfg(test)]` (a `mod tests
/// { … }` block, a `use`, or a `mod NAME;` whose file is then test-only).
fn production_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let code = match line.find("//") {
            Some(at) => format!("{}{}", &line[..at], " ".repeat(line.len() - at)),
            None => line.to_string(),
        };
        out.push_str(&code);
        out.push('\n');
    }
    let bytes: Vec<char> = out.chars().collect();
    let mut keep = bytes.clone();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= bytes.len() {
        if bytes[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        // Blank from the attribute to the end of the item it guards: the
        // first `;` at depth 0, or the `}` that closes its first `{`.
        let mut j = i + marker.len();
        let mut depth = 0;
        while j < bytes.len() {
            match bytes[j] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        for c in &mut keep[i..j.min(bytes.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = j;
    }
    keep.into_iter().collect()
}

/// Every top-level module a `crate::` path in `code` names, with the
/// 1-based line it is on; a `use crate::{a::…, b, c::{…}}` group names
/// each of its top-level members.
fn targets(code: &str) -> Vec<(usize, String)> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("crate::") {
        let at = from + found + "crate::".len();
        from = at;
        let after = &code[at..];
        if !after.starts_with('{') {
            let name = word(after);
            if !name.is_empty() {
                out.push((line_of(at), name));
            }
            continue;
        }
        // A group: the words that start each top-level member.
        let mut depth = 0;
        let mut start_of_member = true;
        for (k, c) in after.char_indices() {
            match c {
                '{' => {
                    depth += 1;
                    start_of_member = depth == 1;
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => start_of_member = true,
                c if c.is_whitespace() => {}
                _ if start_of_member && depth == 1 => {
                    let name = word(&after[k..]);
                    if !name.is_empty() {
                        out.push((line_of(at + k), name));
                    }
                    start_of_member = false;
                }
                _ => {}
            }
        }
    }
    out
}

/// Files declared under `#[cfg(test)]` (`#[cfg(test)] mod fake;`): test
/// code, like an inline `mod tests`.
fn test_only_files(src: &Path, files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = fs::read_to_string(file).unwrap();
        let dir = if file
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
        {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            if pair[0] != "#[cfg(test)]" {
                continue;
            }
            let decl = pair[1]
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                for candidate in [
                    dir.join(format!("{name}.rs")),
                    dir.join(name).join("mod.rs"),
                ] {
                    if candidate.starts_with(src) {
                        out.insert(candidate);
                    }
                }
            }
        }
    }
    out
}

struct Graph {
    edges: BTreeMap<String, BTreeSet<String>>,
    upward: Vec<String>,
    unknown: BTreeSet<String>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut g = Graph {
        edges: BTreeMap::new(),
        upward: Vec::new(),
        unknown: BTreeSet::new(),
    };
    let test_only = test_only_files(&src, &files);
    for file in &files {
        let Some(from) = module_of(&src, file) else {
            continue;
        };
        let Some(from_rank) = rank(&from) else {
            g.unknown.insert(from);
            continue;
        };
        if test_only.contains(file) {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        let code = production_code(&text);
        let lines: Vec<&str> = text.lines().collect();
        for (n, to) in targets(&code) {
            if to == from {
                continue;
            }
            let Some(to_rank) = rank(&to) else {
                continue; // a crate-root item (a macro, say), not a module
            };
            g.edges.entry(from.clone()).or_default().insert(to.clone());
            if to_rank > from_rank {
                g.upward.push(format!(
                    "{}:{n}: {from} uses {to}, a later layer: {}",
                    file.strip_prefix(&src).unwrap().display(),
                    lines.get(n - 1).map_or("", |l| l.trim())
                ));
            }
        }
    }
    g
}

#[test]
fn no_stage_uses_a_later_one() {
    let g = graph();
    for (from, to) in &g.edges {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        println!("{from} -> {}", to.join(" "));
    }
    println!(
        "{} modules, {} edges, {} upward",
        g.edges.len(),
        g.edges.values().map(BTreeSet::len).sum::<usize>(),
        g.upward.len()
    );
    assert!(
        g.unknown.is_empty(),
        "modules missing from LAYERS in tests/layering.rs (place each in its layer): {:?}",
        g.unknown
    );
    assert!(
        g.upward.is_empty(),
        "{} upward uses (move the item down to the layer that owns it, or the user up):\n{}",
        g.upward.len(),
        g.upward.join("\n")
    );
}

#[test]
fn the_reader_sees_groups_and_skips_comments_and_tests() {
    let names = |code: &str| -> Vec<String> {
        targets(&production_code(code))
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    };
    assert_eq!(
        names("use crate::{docker::Engine, results::{Cell, Round}, host};"),
        ["docker", "results", "host"]
    );
    assert_eq!(
        names(
            "use crate::{\n    bench::x,\n    load::{a, b},\n};\nfn f() { crate::serve::start(); }"
        ),
        ["bench", "load", "serve"]
    );
    assert_eq!(
        names("let t = crate::host::clock::now_ns(); // crate::bench"),
        ["host"]
    );
    assert_eq!(
        names("fn a() {}\n#[cfg(test)]\nmod tests {\n    use crate::bench;\n    fn x() { if y { crate::cli::z() } }\n}\nuse crate::units;"),
        ["units"]
    );
    assert_eq!(targets("a\nb crate::x\n")[0].0, 2);
}

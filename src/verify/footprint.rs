//! What a framework's app costs to write and ship: lines of code of its
//! folder and the size of its binary, recorded beside the contract checks.
//!
//! How lines are counted (roughly, on purpose, and the same for everyone):
//! every text file under `frameworks/NAME/` except `framework.yaml`,
//! `Dockerfile`, `Cargo.lock`, `*.md`, lock files, and hidden or build
//! folders (`target`, `node_modules`, `__pycache__`); per language by file
//! extension; a line counts when it is not blank and not only a comment.
//! Comments are `//` and `/* … */` for C-like languages, `#` for Python,
//! shell, TOML, YAML and nginx config, `--` for SQL. Python docstrings and
//! comment markers inside strings are not recognised (both are rare in a
//! benchmark app and cut both ways).
//!
//! Pure functions plus one directory walk; no Docker here (the image
//! engine measures the binary, this module only formats it).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// File names never counted: the harness's files, not the app.
const EXCLUDED_FILES: [&str; 6] = [
    "framework.yaml",
    "Dockerfile",
    "Cargo.lock",
    "package-lock.json",
    "go.sum",
    ".dockerignore",
];
/// Folders never entered: build output and dependencies.
const EXCLUDED_DIRS: [&str; 4] = ["target", "node_modules", "__pycache__", "vendor"];

/// Lines of code of one framework's app.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinesOfCode {
    /// Non-blank, non-comment lines over every counted file.
    pub total: u64,
    /// The same, per language (by file extension).
    pub by_language: BTreeMap<String, u64>,
    /// Files counted.
    pub files: u32,
}

impl std::fmt::Display for LinesOfCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} lines", self.total)?;
        if self.by_language.len() > 1 {
            let parts: Vec<String> = self
                .by_language
                .iter()
                .map(|(lang, n)| format!("{lang} {n}"))
                .collect();
            write!(f, " ({})", parts.join(", "))?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Comments {
    /// `//` lines and `/* */` blocks.
    CLike,
    /// `#` lines.
    Hash,
    /// `--` lines.
    DashDash,
    /// No comment syntax known: every non-blank line counts.
    None,
}

/// Language and comment syntax of a file, by extension; None for files that
/// are not source (images, binaries) or are excluded by name.
fn language(file_name: &str) -> Option<(&'static str, Comments)> {
    if EXCLUDED_FILES.contains(&file_name) || file_name.ends_with(".md") {
        return None;
    }
    let ext = file_name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    Some(match ext {
        "rs" => ("rust", Comments::CLike),
        "go" => ("go", Comments::CLike),
        "js" | "mjs" | "cjs" => ("javascript", Comments::CLike),
        "ts" => ("typescript", Comments::CLike),
        "java" => ("java", Comments::CLike),
        "kt" => ("kotlin", Comments::CLike),
        "c" | "h" => ("c", Comments::CLike),
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => ("c++", Comments::CLike),
        "py" => ("python", Comments::Hash),
        "sh" => ("shell", Comments::Hash),
        "toml" => ("toml", Comments::Hash),
        "yaml" | "yml" => ("yaml", Comments::Hash),
        "conf" => ("config", Comments::Hash),
        "txt" | "cfg" | "ini" => ("config", Comments::Hash),
        "sql" => ("sql", Comments::DashDash),
        "json" => ("json", Comments::None),
        "mod" if file_name == "go.mod" => ("go", Comments::CLike),
        "" if file_name == "Makefile" => ("make", Comments::Hash),
        _ => return None,
    })
}

/// Non-blank, non-comment lines of `text` for a file named `file_name`, with
/// its language; None when the file is not counted.
pub fn count_file(file_name: &str, text: &str) -> Option<(&'static str, u64)> {
    let (lang, comments) = language(file_name)?;
    let mut in_block = false;
    let mut n = 0;
    for line in text.lines() {
        let mut rest = line.trim();
        let mut code = false;
        match comments {
            Comments::CLike => {
                // Walk the line through block-comment boundaries; any text
                // outside a comment makes it a code line.
                while !rest.is_empty() {
                    if in_block {
                        match rest.find("*/") {
                            Some(i) => {
                                in_block = false;
                                rest = rest[i + 2..].trim_start();
                            }
                            None => rest = "",
                        }
                    } else if rest.starts_with("//") {
                        rest = "";
                    } else if let Some(after) = rest.strip_prefix("/*") {
                        in_block = true;
                        rest = after;
                    } else {
                        code = true;
                        match rest.find("/*") {
                            // A block opened after code on the same line.
                            Some(i) if !rest[..i].contains("//") => {
                                in_block = true;
                                rest = &rest[i + 2..];
                            }
                            _ => rest = "",
                        }
                    }
                }
            }
            Comments::Hash => code = !rest.is_empty() && !rest.starts_with('#'),
            Comments::DashDash => code = !rest.is_empty() && !rest.starts_with("--"),
            Comments::None => code = !rest.is_empty(),
        }
        if code {
            n += 1;
        }
    }
    Some((lang, n))
}

/// Count the lines of code of the app in `dir` (a framework folder).
pub fn count_dir(dir: &Path) -> std::io::Result<LinesOfCode> {
    let mut loc = LinesOfCode::default();
    walk(dir, &mut loc)?;
    Ok(loc)
}

fn walk(dir: &Path, loc: &mut LinesOfCode) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !name.starts_with('.') && !EXCLUDED_DIRS.contains(&name.as_str()) {
                walk(&entry.path(), loc)?;
            }
        } else if kind.is_file() && !name.starts_with('.') {
            // Binary or non-UTF-8 files are not source.
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            if let Some((lang, n)) = count_file(&name, &text) {
                loc.total += n;
                *loc.by_language.entry(lang.to_string()).or_default() += n;
                loc.files += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rust_without_blank_and_comment_lines() {
        let text = "//! doc\nuse x;\n\n/* block\n still */ fn a() {}\n/*\n*/\nlet s = 1; // tail\n  // indented\n";
        assert_eq!(count_file("main.rs", text), Some(("rust", 3)));
    }

    #[test]
    fn counts_python_and_config_with_hash_comments() {
        let text = "#!/usr/bin/env python3\n# comment\nimport os\n\nprint(1)  # tail\n";
        assert_eq!(count_file("app.py", text), Some(("python", 2)));
        assert_eq!(
            count_file("nginx.conf", "# c\nworker_processes 1;\n"),
            Some(("config", 1))
        );
    }

    #[test]
    fn skips_harness_files_and_unknown_kinds() {
        for name in [
            "framework.yaml",
            "Dockerfile",
            "Cargo.lock",
            "README.md",
            "logo.png",
        ] {
            assert_eq!(count_file(name, "x\n"), None, "{name}");
        }
    }

    #[test]
    fn walks_a_framework_folder_skipping_target() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("framework.yaml"), "name: x\n").unwrap();
        std::fs::write(d.join("Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(d.join("Cargo.toml"), "[package]\nname = \"x\"\n# c\n").unwrap();
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(d.join("src/main.rs"), "fn main() {\n}\n").unwrap();
        std::fs::create_dir_all(d.join("target/debug")).unwrap();
        std::fs::write(d.join("target/debug/gen.rs"), "fn x() {}\n").unwrap();
        let loc = count_dir(d).unwrap();
        assert_eq!(loc.total, 4);
        assert_eq!(loc.files, 2);
        assert_eq!(loc.by_language["rust"], 2);
        assert_eq!(loc.to_string(), "4 lines (rust 2, toml 2)");
    }

    #[test]
    fn formats_bytes_in_binary_units() {}
}

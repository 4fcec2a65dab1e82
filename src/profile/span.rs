//! Where each field of a profile is written: a map from field path
//! (`server.nofile`, `concurrency[1]`, `server.sysctls["net.core.somaxconn"]`)
//! to its line and column.
//!
//! serde-saphyr gives every deserialization error a location but no field
//! path, and the semantic checks in `validate.rs` know the path but not the
//! location. This module joins the two by walking the parser's event stream
//! once, so the typed structs stay plain (no `Spanned<T>` in every field, which
//! would also leak into the JSON Schema). It reads YAML only; it knows nothing
//! about what a profile means.

use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Parser, ScanError};

/// A 1-based line and column in the profile text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    /// Line, counting from 1.
    pub line: usize,
    /// Column, counting from 1.
    pub col: usize,
}

impl Pos {
    fn from_marker(m: &serde_saphyr::granit_parser::Marker) -> Self {
        Pos {
            line: m.line(),
            col: m.col() + 1,
        }
    }
}

/// Locations of one node.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// Where the key naming this node starts (absent for the root and items).
    key: Option<Pos>,
    /// Where the value starts.
    start: Pos,
    /// Where the value ends (exclusive).
    end: Pos,
}

/// Field path → location, for one profile file.
#[derive(Debug, Clone, Default)]
pub struct Spans {
    nodes: HashMap<String, Node>,
}

/// The path of `key` under `parent`. Keys that are not plain identifiers
/// (sysctl names contain dots) are quoted so the path stays unambiguous.
pub fn key(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (parent.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{parent}.{key}"),
        (_, false) => format!("{parent}[{key:?}]"),
    }
}

/// The path of item `i` of the sequence at `parent`.
pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

enum Frame {
    Map {
        path: String,
        /// The key whose value comes next, with its position; `None` while a
        /// key is expected.
        pending: Option<(String, Pos)>,
        /// Complex (non-scalar) keys are skipped: depth of nesting inside one.
        skipping: usize,
    },
    Seq {
        path: String,
        next: usize,
    },
}

impl Spans {
    /// Walk `text` and record every node. A YAML syntax error is returned with
    /// its position, so callers report it before trying to deserialize.
    pub fn parse(text: &str) -> Result<Spans, (Pos, String)> {
        let mut spans = Spans::default();
        let mut stack: Vec<Frame> = Vec::new();
        // Start positions of open collections, parallel to `stack`.
        let mut opened: Vec<(String, Option<Pos>, Pos)> = Vec::new();
        for item in Parser::new_from_str(text) {
            let (event, span) = item.map_err(|e: ScanError| {
                (
                    Pos {
                        line: e.marker().line(),
                        col: e.marker().col() + 1,
                    },
                    e.info().to_string(),
                )
            })?;
            let start = Pos::from_marker(&span.start);
            let end = Pos::from_marker(&span.end);
            let is_open = matches!(event, Event::MappingStart(..) | Event::SequenceStart(..));
            let is_close = matches!(event, Event::MappingEnd | Event::SequenceEnd);
            let is_node = is_open || matches!(event, Event::Scalar(..) | Event::Alias(..));

            // Inside a complex mapping key: only track nesting.
            if let Some(Frame::Map { skipping, .. }) = stack.last_mut() {
                if *skipping > 0 {
                    if is_open {
                        *skipping += 1;
                    } else if is_close {
                        *skipping -= 1;
                    }
                    continue;
                }
            }

            if is_node {
                // Where does this node sit in its parent?
                let (path, key_pos) = match stack.last_mut() {
                    None => (String::new(), None),
                    Some(Frame::Seq { path, next }) => {
                        *next += 1;
                        (index(path, *next - 1), None)
                    }
                    Some(Frame::Map {
                        path,
                        pending,
                        skipping,
                    }) => match pending.take() {
                        Some((k, kpos)) => (key(path, &k), Some(kpos)),
                        None => {
                            // This node is a key.
                            match &event {
                                Event::Scalar(v, ..) => *pending = Some((v.to_string(), start)),
                                _ if is_open => {
                                    *skipping = 1;
                                    *pending = Some(("?".to_string(), start));
                                }
                                _ => *pending = Some(("*".to_string(), start)),
                            }
                            continue;
                        }
                    },
                };
                if is_open {
                    opened.push((path.clone(), key_pos, start));
                    stack.push(match event {
                        Event::MappingStart(..) => Frame::Map {
                            path,
                            pending: None,
                            skipping: 0,
                        },
                        _ => Frame::Seq { path, next: 0 },
                    });
                } else {
                    spans.add(path, key_pos, start, end);
                }
            } else if is_close {
                stack.pop();
                if let Some((path, key_pos, start)) = opened.pop() {
                    spans.add(path, key_pos, start, end);
                }
            }
        }
        Ok(spans)
    }

    fn add(&mut self, path: String, key: Option<Pos>, start: Pos, end: Pos) {
        self.nodes.insert(path, Node { key, start, end });
    }

    /// Where the value at `path` starts; falls back to the nearest ancestor
    /// that was written (a defaulted field has no position of its own), then
    /// to the top of the file.
    pub fn value(&self, path: &str) -> Pos {
        let mut p = path;
        loop {
            if let Some(n) = self.nodes.get(p) {
                return n.start;
            }
            match parent(p) {
                Some(up) => p = up,
                None => return Pos { line: 1, col: 1 },
            }
        }
    }

    /// Where the key naming `path` starts (for "unknown field"-style errors),
    /// else where its value starts.
    pub fn key(&self, path: &str) -> Pos {
        match self.nodes.get(path).and_then(|n| n.key) {
            Some(k) => k,
            None => self.value(path),
        }
    }

    /// Whether `path` was written in the file (rather than defaulted).
    pub fn written(&self, path: &str) -> bool {
        self.nodes.contains_key(path)
    }

    /// The field a deserializer error at `pos` is about: a key that starts
    /// exactly there, else the innermost value whose text contains `pos`.
    pub fn path_at(&self, pos: Pos) -> Option<String> {
        if let Some((p, _)) = self.nodes.iter().find(|(_, n)| n.key == Some(pos)) {
            return Some(p.clone());
        }
        self.nodes
            .iter()
            .filter(|(_, n)| n.start <= pos && pos <= n.end)
            // Innermost = latest start, then earliest end.
            .max_by(|(pa, a), (pb, b)| {
                (a.start, std::cmp::Reverse(a.end), pa.len()).cmp(&(
                    b.start,
                    std::cmp::Reverse(b.end),
                    pb.len(),
                ))
            })
            .map(|(p, _)| p.clone())
    }
}

/// The parent of a path (`server.nofile` → `server`, `a[2]` → `a`), or
/// `None` for a top-level field.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = if path.ends_with(']') {
        // Find the `[` that opens the last segment (quoted keys may hold `]`
        // only inside quotes, which our sysctl names never do).
        path.rfind('[')
    } else {
        path.rfind(['.', '['])
    };
    Some(cut.map_or("", |i| &path[..i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
rounds: 3
concurrency: [100, 1000]
server:
  nofile: 1024
  sysctls:
    net.core.somaxconn: 4096
";

    #[test]
    fn records_keys_values_and_items() {
        let s = Spans::parse(TEXT).unwrap();
        assert_eq!(s.key("rounds"), Pos { line: 1, col: 1 });
        assert_eq!(s.value("rounds"), Pos { line: 1, col: 9 });
        assert_eq!(s.value("concurrency[1]"), Pos { line: 2, col: 20 });
        assert_eq!(s.value("server.nofile"), Pos { line: 4, col: 11 });
        let sysctl = r#"server.sysctls["net.core.somaxconn"]"#;
        assert_eq!(s.key(sysctl), Pos { line: 6, col: 5 });
        assert!(s.written("server.sysctls"));
        assert!(!s.written("server.memory"));
    }

    #[test]
    fn missing_fields_point_at_their_nearest_written_ancestor() {
        let s = Spans::parse(TEXT).unwrap();
        assert_eq!(s.value("server.memory"), s.value("server"));
        assert_eq!(s.value("thresholds.max_cv"), Pos { line: 1, col: 1 });
    }

    #[test]
    fn maps_a_position_back_to_the_innermost_field() {
        let s = Spans::parse(TEXT).unwrap();
        assert_eq!(
            s.path_at(Pos { line: 4, col: 3 }).as_deref(),
            Some("server.nofile")
        );
        assert_eq!(
            s.path_at(Pos { line: 4, col: 11 }).as_deref(),
            Some("server.nofile")
        );
        assert_eq!(
            s.path_at(Pos { line: 2, col: 15 }).as_deref(),
            Some("concurrency[0]")
        );
    }

    #[test]
    fn reports_syntax_errors_with_their_position() {
        let (pos, msg) = Spans::parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(pos.line >= 1, "{pos:?}");
        assert!(!msg.is_empty());
    }

    #[test]
    fn parent_paths() {
        assert_eq!(parent("server.nofile"), Some("server"));
        assert_eq!(parent("concurrency[2]"), Some("concurrency"));
        assert_eq!(
            parent(r#"server.sysctls["net.core.somaxconn"]"#),
            Some("server.sysctls")
        );
        assert_eq!(parent("rounds"), Some(""));
        assert_eq!(parent(""), None);
    }
}

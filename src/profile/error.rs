//! The one error type of the profile module. Every variant names the file;
//! those about content also carry line, column and field path, and a
//! suggestion where one helps. Every one is bad input (exit code 2).

use std::fmt;
use std::path::PathBuf;

use super::span::{Pos, Spans};

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read.
    #[error("cannot read profile {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A bare name did not match a file in the profiles folder.
    #[error("no profile named `{name}`: {} does not exist{}", path.display(), Available(available, suggestion.as_deref()))]
    NotFound {
        /// The name asked for.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
        /// Profiles that do exist there.
        available: Vec<String>,
        /// The closest existing name.
        suggestion: Option<String>,
    },
    /// The text is not YAML.
    #[error("{}:{line}:{col}: YAML syntax error: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Line, from 1.
        line: usize,
        /// Column, from 1.
        col: usize,
        /// What the parser said.
        message: String,
    },
    /// The YAML is well-formed but a field is wrong.
    #[error("{}:{line}:{col}: {}: {message}{}", path.display(), Field(field), Hint(suggestion.as_deref()))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Line, from 1.
        line: usize,
        /// Column, from 1.
        col: usize,
        /// Field path, e.g. `server.nofile` or `concurrency[2]`; empty for the
        /// whole document.
        field: String,
        /// What is wrong and what was expected.
        message: String,
        /// The nearest valid name, for typos.
        suggestion: Option<String>,
    },
}

impl crate::exit::ExitCodeOf for ProfileError {
    fn exit_code(&self) -> crate::exit::ExitCode {
        use crate::exit::ExitCode::BadInput;
        match self {
            ProfileError::Read { .. } => BadInput,
            ProfileError::NotFound { .. } => BadInput,
            ProfileError::Syntax { .. } => BadInput,
            ProfileError::Invalid { .. } => BadInput,
        }
    }
}

struct Field<'a>(&'a str);

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("the profile")
        } else {
            write!(f, "`{}`", self.0)
        }
    }
}

struct Hint<'a>(Option<&'a str>);

impl fmt::Display for Hint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(s) => write!(f, " (did you mean `{s}`?)"),
            None => Ok(()),
        }
    }
}

struct Available<'a>(&'a [String], Option<&'a str>);

impl fmt::Display for Available<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = self.1 {
            write!(f, " (did you mean `{s}`?)")?;
        }
        if self.0.is_empty() {
            f.write_str("; no profiles found there")
        } else {
            write!(f, "; available: {}", self.0.join(", "))
        }
    }
}

/// Builds located errors for one file.
pub(crate) struct Locator<'a> {
    pub path: &'a std::path::Path,
    pub spans: &'a Spans,
    /// The profile text, to quote a bad scalar back to the user.
    pub text: &'a str,
}

impl Locator<'_> {
    /// `, found `…`` quoting the plain scalar that starts at `pos`, if any.
    fn found(&self, pos: Pos) -> String {
        let line = self
            .text
            .lines()
            .nth(pos.line.saturating_sub(1))
            .unwrap_or("");
        let rest: String = line.chars().skip(pos.col.saturating_sub(1)).collect();
        let scalar = rest.split([',', ']', '}', '#']).next().unwrap_or("").trim();
        if scalar.is_empty() {
            String::new()
        } else {
            format!(", found `{scalar}`")
        }
    }

    fn at(
        &self,
        pos: Pos,
        field: &str,
        message: String,
        suggestion: Option<String>,
    ) -> ProfileError {
        ProfileError::Invalid {
            path: self.path.to_path_buf(),
            line: pos.line,
            col: pos.col,
            field: field.to_string(),
            message,
            suggestion,
        }
    }

    /// An error about the value at `field`.
    pub fn value(&self, field: &str, message: impl Into<String>) -> ProfileError {
        self.at(self.spans.value(field), field, message.into(), None)
    }

    /// An error about the value at `field`, with a suggested replacement.
    pub fn value_hint(
        &self,
        field: &str,
        message: impl Into<String>,
        hint: Option<&str>,
    ) -> ProfileError {
        let pos = self.spans.value(field);
        self.at(pos, field, message.into(), hint.map(str::to_string))
    }

    /// An error about the key naming `field`.
    pub fn key_hint(
        &self,
        field: &str,
        message: impl Into<String>,
        hint: Option<&str>,
    ) -> ProfileError {
        let pos = self.spans.key(field);
        self.at(pos, field, message.into(), hint.map(str::to_string))
    }

    /// Translate a serde-saphyr error: its location is mapped back to the
    /// field path, and the common serde errors are reworded with the nearest
    /// valid name.
    pub fn yaml_error(&self, err: &serde_saphyr::Error) -> ProfileError {
        use serde_saphyr::Error as E;
        let err = err.without_snippet();
        let pos = err
            .location()
            .filter(|l| l.line() > 0)
            .map(|l| Pos {
                line: l.line() as usize,
                col: l.column().max(1) as usize,
            })
            .unwrap_or(Pos { line: 1, col: 1 });
        let field = self.spans.path_at(pos).unwrap_or_default();
        let one_of = |names: &[&str]| {
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (message, suggestion) = match err {
            E::SerdeUnknownField {
                field: name,
                expected,
                ..
            } => (
                format!(
                    "unknown field `{name}`; expected one of {}",
                    one_of(expected)
                ),
                super::suggest(name, expected.iter().copied()),
            ),
            E::SerdeUnknownVariant {
                variant, expected, ..
            } => (
                format!(
                    "unknown value `{variant}`; expected one of {}",
                    one_of(expected)
                ),
                super::suggest(variant, expected.iter().copied()),
            ),
            E::SerdeInvalidType {
                unexpected,
                expected,
                ..
            }
            | E::SerdeInvalidValue {
                unexpected,
                expected,
                ..
            } => (format!("expected {expected}, found {unexpected}"), None),
            E::SerdeMissingField { field: name, .. } => (format!("missing field `{name}`"), None),
            E::DuplicateMappingKey { key, .. } => (
                match key {
                    Some(k) => format!("`{k}` is written twice; keep one"),
                    None => "a key is written twice; keep one".to_string(),
                },
                None,
            ),
            E::Message { msg, .. } => (msg.clone(), None),
            E::InvalidScalar { ty, .. } => (
                match *ty {
                    "u8" | "u16" | "u32" | "u64" | "usize" => {
                        "expected a whole number (0 or more)".to_string()
                    }
                    "f32" | "f64" | "floating point" => "expected a number".to_string(),
                    "bool" | "boolean" => "expected `true` or `false`".to_string(),
                    other => format!("expected a value of type {other}"),
                } + &self.found(pos),
                None,
            ),
            E::Unexpected { expected, .. } => (
                match *expected {
                    "sequence start" => "expected a list, e.g. `[a, b]`".to_string(),
                    "mapping start" => "expected a mapping of `field: value` lines".to_string(),
                    other => format!("expected {other}"),
                },
                None,
            ),
            other => (
                other.render_with_options(serde_saphyr::render_options! {
                    snippets: serde_saphyr::SnippetMode::Off,
                }),
                None,
            ),
        };
        self.at(pos, &field, message, suggestion.map(str::to_string))
    }
}

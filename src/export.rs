//! What an output format is: an [`Exporter`] turns a document (a run's
//! results, a comparison, an environment report, verification reports)
//! into files of bytes, so every report fairground prints or writes is
//! made one way and can be snapshot-tested. The command decides where the
//! bytes go (a run directory, a file named by a flag, the terminal);
//! exporters never touch the disk (hyperfine's `Exporter` is the pattern).

use std::path::PathBuf;

/// One file an exporter produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Its name: inside a run directory (`results.md`, `hgrm/x.hgrm`), or
    /// the default file name of a document written elsewhere
    /// (`compare.html`).
    pub path: PathBuf,
    /// File contents.
    pub bytes: Vec<u8>,
}

impl Rendered {
    /// One rendered file: the usual result of a one-file format.
    pub fn one(path: &str, bytes: Vec<u8>) -> Vec<Rendered> {
        vec![Rendered {
            path: PathBuf::from(path),
            bytes,
        }]
    }
}

/// An output format of documents of type `Doc`.
pub trait Exporter<Doc: ?Sized> {
    /// Render `doc` into one or more files.
    fn render(&self, doc: &Doc) -> anyhow::Result<Vec<Rendered>>;
}

/// A document as pretty-printed JSON ending in a newline: the body of
/// every JSON format (results, comparison, environment, verification).
pub fn json_bytes<T: serde::Serialize + ?Sized>(doc: &T) -> anyhow::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(doc)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The bytes of a one-file format (what a command prints or writes).
pub fn bytes_of<Doc: ?Sized>(format: &dyn Exporter<Doc>, doc: &Doc) -> anyhow::Result<Vec<u8>> {
    Ok(format
        .render(doc)?
        .into_iter()
        .flat_map(|r| r.bytes)
        .collect())
}

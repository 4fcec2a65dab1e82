//! Escaping for the text formats fairground writes, so text that comes from
//! framework folders and containers (names, notes, error messages) cannot
//! change the structure of a report.

/// Escape a value for a Markdown table cell: `|` would end the cell and a
/// newline the row.
pub fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

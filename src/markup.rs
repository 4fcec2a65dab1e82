//! Escaping for the text formats fairground writes, so text that comes from
//! framework folders and containers (names, notes, error messages) cannot
//! change the structure of a report.

/// Escape a value for a Markdown table cell: `|` would end the cell and a
/// newline the row, and a `<` that opens a tag (`<script`, `</x`, `<!--`)
/// would reach a renderer as raw HTML (CommonMark passes HTML through), so
/// it is backslash-escaped; `p99 < 5ms` stays as it is.
pub fn md_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '|' => out.push_str("\\|"),
            '\n' => out.push(' '),
            '\r' => {}
            '<' if chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')) =>
            {
                out.push_str("\\<")
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_markdown_cell_keeps_its_row_and_passes_no_tag_on() {
        assert_eq!(md_cell("a | b\nc"), "a \\| b c");
        assert_eq!(md_cell("<script>x</script>"), "\\<script>x\\</script>");
        assert_eq!(
            md_cell("p99 < 5ms, <= 3, <!-- c -->"),
            "p99 < 5ms, <= 3, \\<!-- c -->"
        );
    }
}

//! HTML tables: a header row and rows of cells, numbers right-aligned and
//! carrying their raw value so the page's script sorts them as numbers.
//!
//! It renders what it is given; it knows nothing of results.

use maud::{html, Markup};

/// One table cell.
#[derive(Debug, Clone)]
pub struct Td {
    html: Markup,
    sort: Option<f64>,
    class: String,
}

impl Td {
    /// Plain text (escaped).
    pub fn text(s: &str) -> Td {
        Td::html(html! { (s) })
    }

    /// Markup (built by a template, so escaped where it holds text).
    pub fn html(html: Markup) -> Td {
        Td {
            html,
            sort: None,
            class: String::new(),
        }
    }

    /// A number: its text (with unit) and the value it sorts by.
    pub fn num(text: &str, value: f64) -> Td {
        Td {
            html: html! { (text) },
            sort: value.is_finite().then_some(value),
            class: "num".into(),
        }
    }

    /// A number that may be absent (shown as –).
    pub fn opt(value: Option<f64>, fmt: impl Fn(f64) -> String) -> Td {
        match value {
            Some(v) => Td::num(&fmt(v), v),
            None => Td::text("–").class("num"),
        }
    }

    /// A latency percentile of `l`: the figure, "> timeout" (sorted last)
    /// or "–" when unknown.
    pub fn latency(l: &crate::results::Latency, v: Option<u64>) -> Td {
        match l.rank_value(v) {
            Some(x) => Td::num(&l.show(v), x).sorted(x),
            None => Td::opt(None, |_| String::new()),
        }
    }

    /// Sort by `value` (for markup that is not the bare number).
    pub fn sorted(mut self, value: f64) -> Td {
        self.sort = value.is_finite().then_some(value);
        self
    }

    /// Add a class (e.g. the verdict's); an empty one adds nothing.
    pub fn class(mut self, class: &str) -> Td {
        if class.is_empty() {
            return self;
        }
        if !self.class.is_empty() {
            self.class.push(' ');
        }
        self.class.push_str(class);
        self
    }
}

/// A table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    head: Vec<String>,
    rows: Vec<(String, Vec<Td>)>,
}

impl Table {
    /// A table with these column headings (plain text).
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Append a row.
    pub fn row(&mut self, cells: Vec<Td>) {
        self.rows.push((String::new(), cells));
    }

    /// Append a row with a class (e.g. its verdict).
    pub fn row_with_class(&mut self, class: &str, cells: Vec<Td>) {
        self.rows.push((class.to_string(), cells));
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The `<table>`; sortable by any column when the script runs.
    pub fn render(&self) -> Markup {
        html! {
            table class="sortable" {
                thead { tr { @for h in &self.head { th scope="col" { (h) } } } }
                tbody {
                    @for (class, cells) in &self.rows {
                        tr class=[(!class.is_empty()).then_some(class)] {
                            @for c in cells {
                                td class=[(!c.class.is_empty()).then_some(&c.class)]
                                    data-sort=[c.sort] { (c.html) }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_carry_their_sort_value_and_text_is_escaped() {
        let mut t = Table::new(&["framework", "req/s"]);
        t.row_with_class(
            "flagged",
            vec![Td::text("a<b"), Td::num("1,200 req/s", 1200.0)],
        );
        t.row(vec![Td::text("c"), Td::opt(None, |v| v.to_string())]);
        let html = t.render().into_string();
        assert!(html.contains("<tr class=\"flagged\"><td>a&lt;b</td><td class=\"num\" data-sort=\"1200\">1,200 req/s</td></tr>"), "{html}");
        assert!(html.contains("<td class=\"num\">–</td>"), "{html}");
    }
}

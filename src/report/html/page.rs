//! The page shell: one self-contained HTML document (inline style and
//! script, a Content-Security-Policy that forbids every fetch) with a
//! header, a table of contents, sections and a footer; and the figure and
//! legend wrappers every chart sits in. Shared by every HTML report.
//!
//! It lays out what it is given; it knows nothing of results.

use std::fmt::Write as _;

use super::charts::{esc, hex, series_style, Mark};

/// The page's style sheet (screen and print).
const CSS: &str = include_str!("page.css");
/// The page's script: table sorting, series toggles, opening every
/// collapsed table before printing. The page reads fully without it.
const JS: &str = include_str!("page.js");

/// Nothing may be loaded from anywhere: styles and scripts are inline,
/// images are inline SVG. A browser that honours this cannot fetch even if
/// a report ever carried a URL by mistake.
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

/// One section of a page, listed in its table of contents.
#[derive(Debug, Clone)]
pub struct Section {
    /// Element id (the anchor).
    pub id: String,
    /// Heading, plain text.
    pub heading: String,
    /// Content, HTML.
    pub body: String,
}

/// A whole page.
#[derive(Debug, Clone)]
pub struct Page {
    /// Document title, plain text.
    pub title: String,
    /// Content above the table of contents, HTML.
    pub header: String,
    /// Sections in order.
    pub sections: Vec<Section>,
    /// Footer, HTML.
    pub footer: String,
}

impl Page {
    /// The complete document.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(64 * 1024);
        let _ = write!(
            s,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<header>\n{}</header>\n",
            esc(&self.title),
            self.header
        );
        s.push_str("<nav aria-label=\"contents\"><ol>\n");
        for sec in &self.sections {
            let _ = writeln!(
                s,
                "<li><a href=\"#{}\">{}</a></li>",
                esc(&sec.id),
                esc(&sec.heading)
            );
        }
        s.push_str("</ol></nav>\n<main>\n");
        for sec in &self.sections {
            let _ = write!(
                s,
                "<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n",
                esc(&sec.id),
                esc(&sec.heading),
                sec.body
            );
        }
        let _ = write!(
            s,
            "</main>\n<footer>\n{}</footer>\n<script>\n{JS}</script>\n</body>\n</html>\n",
            self.footer
        );
        s
    }
}

/// A chart with its caption, legend, footnotes and, collapsed below it,
/// the table of its numbers.
#[derive(Debug, Clone, Default)]
pub struct Figure {
    /// Caption, HTML.
    pub caption: String,
    /// The chart, an `<svg>`.
    pub svg: String,
    /// Legend, HTML (see [`legend`]).
    pub legend: String,
    /// Footnotes under the chart, HTML.
    pub notes: String,
    /// The chart's numbers, an HTML table.
    pub numbers: String,
    /// Extra class (e.g. `small` for the timelines).
    pub class: &'static str,
}

impl Figure {
    /// The `<figure>` element.
    pub fn render(&self) -> String {
        let class = if self.class.is_empty() {
            "chart".to_string()
        } else {
            format!("chart {}", self.class)
        };
        let mut s = format!(
            "<figure class=\"{class}\">\n<figcaption>{}</figcaption>\n{}\n",
            self.caption, self.svg
        );
        s.push_str(&self.legend);
        s.push_str(&self.notes);
        if !self.numbers.is_empty() {
            let _ = write!(
                s,
                "<details class=\"numbers\"><summary>Numbers</summary>\n{}</details>\n",
                self.numbers
            );
        }
        s.push_str("</figure>\n");
        s
    }
}

/// One legend entry: a series' name, its style index and verdict.
#[derive(Debug, Clone)]
pub struct LegendItem {
    /// Name shown.
    pub name: String,
    /// Index into [`series_style`] (matches the chart's `data-series`).
    pub style: usize,
    /// Verdict: ⚑ after a flagged series' name, ✗ after one with a
    /// rejected point.
    pub mark: Mark,
}

/// A legend for line charts: a swatch per series; with the script on, a
/// click hides or shows the series.
pub fn legend(items: &[LegendItem]) -> String {
    let mut s = String::from("<ul class=\"legend\">");
    for it in items {
        let (colour, dash) = series_style(it.style);
        let dash = dash
            .map(|d| format!(" stroke-dasharray=\"{d}\""))
            .unwrap_or_default();
        let flag = match it.mark {
            Mark::Plain => "",
            Mark::Flagged => " ⚑",
            Mark::Rejected => " ✗",
        };
        let _ = write!(
            s,
            "<li><button type=\"button\" data-series=\"{}\" aria-pressed=\"true\">\
             <svg width=\"28\" height=\"10\" aria-hidden=\"true\"><line x1=\"1\" y1=\"5\" x2=\"27\" y2=\"5\" \
             stroke=\"{}\" stroke-width=\"3\"{dash}/></svg>{}{flag}</button></li>",
            it.style,
            hex(colour),
            esc(&it.name)
        );
    }
    s.push_str("</ul>\n");
    s
}

/// A swatch legend for a bar chart's series.
pub fn swatches(names: &[&str], colours: &[plotters::style::RGBColor]) -> String {
    let mut s = String::from("<ul class=\"legend swatches\">");
    for (name, c) in names.iter().zip(colours) {
        let _ = write!(
            s,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
            hex(*c),
            esc(name)
        );
    }
    s.push_str("</ul>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_forbids_every_fetch_and_lists_its_sections() {
        let page = Page {
            title: "t <x>".into(),
            header: "<h1>h</h1>".into(),
            sections: vec![Section {
                id: "a".into(),
                heading: "A & B".into(),
                body: "<p>x</p>".into(),
            }],
            footer: String::new(),
        }
        .render();
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<title>t &lt;x&gt;</title>"));
        assert!(page.contains("content=\"default-src 'none';"));
        assert!(page.contains("<li><a href=\"#a\">A &amp; B</a></li>"));
        assert!(page.contains("<section id=\"a\">\n<h2>A &amp; B</h2>"));
        // No URL with a scheme anywhere: nothing could be fetched.
        assert!(!page.contains("http:") && !page.contains("https:"));
    }
}

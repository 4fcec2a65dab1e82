//! The page shell: one self-contained HTML document (inline style and
//! script, a Content-Security-Policy that forbids every fetch) with a
//! header, a table of contents, sections and a footer; and the figure and
//! legend wrappers every chart sits in. Shared by every HTML report.
//!
//! It lays out what it is given; it knows nothing of results.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::charts::{hex, series_style, Mark};

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
    /// Content.
    pub body: Markup,
}

/// A whole page.
#[derive(Debug, Clone)]
pub struct Page {
    /// Document title, plain text.
    pub title: String,
    /// Content above the table of contents.
    pub header: Markup,
    /// Sections in order.
    pub sections: Vec<Section>,
    /// Footer.
    pub footer: Markup,
}

impl Page {
    /// The complete document. Every value is escaped by the template;
    /// only the page's own style sheet and script go in as they are.
    pub fn render(&self) -> String {
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta http-equiv="Content-Security-Policy" content=(CSP);
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (self.title) }
                    style { (PreEscaped(CSS)) }
                }
                body {
                    header { (self.header) }
                    nav aria-label="contents" {
                        ol {
                            @for sec in &self.sections {
                                li { a href={ "#" (sec.id) } { (sec.heading) } }
                            }
                        }
                    }
                    main {
                        @for sec in &self.sections {
                            section id=(sec.id) {
                                h2 { (sec.heading) }
                                (sec.body)
                            }
                        }
                    }
                    footer { (self.footer) }
                    script { (PreEscaped(JS)) }
                }
            }
        }
        .into_string()
    }
}

/// A chart with its caption, legend, footnotes and, collapsed below it,
/// the table of its numbers.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Caption.
    pub caption: Markup,
    /// The chart, an `<svg>`.
    pub svg: Markup,
    /// Legend (see [`legend`]); empty for none.
    pub legend: Markup,
    /// Footnotes under the chart; empty for none.
    pub notes: Markup,
    /// The chart's numbers, a table; empty for none.
    pub numbers: Markup,
    /// Extra class (e.g. `small` for the timelines).
    pub class: &'static str,
}

impl Default for Figure {
    fn default() -> Figure {
        Figure {
            caption: html! {},
            svg: html! {},
            legend: html! {},
            notes: html! {},
            numbers: html! {},
            class: "",
        }
    }
}

impl Figure {
    /// The `<figure>` element.
    pub fn render(&self) -> Markup {
        let class = if self.class.is_empty() {
            "chart".to_string()
        } else {
            format!("chart {}", self.class)
        };
        html! {
            figure class=(class) {
                figcaption { (self.caption) }
                (self.svg)
                (self.legend)
                (self.notes)
                @if !self.numbers.0.is_empty() {
                    details class="numbers" {
                        summary { "Numbers" }
                        (self.numbers)
                    }
                }
            }
        }
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
pub fn legend(items: &[LegendItem]) -> Markup {
    html! {
        ul class="legend" {
            @for it in items {
                @let (colour, dash) = series_style(it.style);
                li {
                    button type="button" data-series=(it.style) aria-pressed="true" {
                        svg width="28" height="10" aria-hidden="true" {
                            line x1="1" y1="5" x2="27" y2="5" stroke=(hex(colour))
                                stroke-width="3" stroke-dasharray=[dash] {}
                        }
                        (it.name)
                        @match it.mark {
                            Mark::Plain => {},
                            Mark::Flagged => " ⚑",
                            Mark::Rejected => " ✗",
                        }
                    }
                }
            }
        }
    }
}

/// A swatch legend for a bar chart's series.
pub fn swatches(names: &[&str], colours: &[plotters::style::RGBColor]) -> Markup {
    html! {
        ul class="legend swatches" {
            @for (name, c) in names.iter().zip(colours) {
                li { span class="swatch" style={ "background:" (hex(*c)) } {} (name) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_forbids_every_fetch_and_lists_its_sections() {
        let page = Page {
            title: "t <x>".into(),
            header: maud::html! { h1 { "h" } },
            sections: vec![Section {
                id: "a".into(),
                heading: "A & B".into(),
                body: maud::html! { p { "x" } },
            }],
            footer: maud::html! {},
        }
        .render();
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<title>t &lt;x&gt;</title>"));
        assert!(page.contains("content=\"default-src 'none';"));
        assert!(page.contains("<li><a href=\"#a\">A &amp; B</a></li>"));
        assert!(page.contains("<section id=\"a\"><h2>A &amp; B</h2>"));
        // No URL with a scheme anywhere: nothing could be fetched.
        assert!(!page.contains("http:") && !page.contains("https:"));
    }
}

//! hgrm/<cell>.hgrm: each cell's latency distribution (all rounds merged) in
//! HdrHistogram's percentile-distribution text format, values in
//! milliseconds, readable by HdrHistogram's plotter and by wrk2 users.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use hdrhistogram::Histogram;

use super::{Exporter, Rendered};
use crate::results::{histogram, Results};

/// Quantile iteration density HdrHistogram's `outputPercentileDistribution`
/// uses by default: 5 reporting points per halving of the remaining distance
/// to 100%.
const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// Histograms hold ns; the .hgrm files show ms, like wrk2's.
const SCALE_TO_MS: f64 = 1_000_000.0;

/// One .hgrm per measured cell.
pub struct HgrmExporter;

impl Exporter<Results> for HgrmExporter {
    fn render(&self, results: &Results) -> anyhow::Result<Vec<Rendered>> {
        let mut out = Vec::new();
        for cell in &results.cells {
            let Some(summary) = &cell.summary else {
                continue;
            };
            let h = histogram::decode(&summary.histogram)
                .with_context(|| format!("cell {}: merged histogram", cell.key))?;
            out.push(Rendered {
                path: PathBuf::from("hgrm").join(format!("{}.hgrm", cell.key.stem())),
                bytes: hgrm_text(&h).into_bytes(),
            });
        }
        Ok(out)
    }
}

/// The percentile distribution table of `h` (values in ns, printed in ms),
/// byte for byte in the layout of HdrHistogram's
/// `outputPercentileDistribution(out, 5, 1000000.0)`.
pub fn hgrm_text(h: &Histogram<u64>) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
            total += v.count_since_last_iteration();
            let value = h.highest_equivalent(v.value_iterated_to()) as f64 / SCALE_TO_MS;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                let _ = writeln!(
                    s,
                    "{value:12.3} {q:2.12} {total:10} {:14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(s, "{value:12.3} {q:2.12} {total:10}");
            }
        }
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            h.mean() / SCALE_TO_MS,
            h.stdev() / SCALE_TO_MS,
            h.max() as f64 / SCALE_TO_MS,
        )
    };
    let _ = writeln!(s, "#[Mean    = {mean:12.3}, StdDeviation   = {stdev:12.3}]");
    let _ = writeln!(
        s,
        "#[Max     = {max:12.3}, Total count    = {:12}]",
        h.len()
    );
    let _ = writeln!(
        s,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        sub_buckets(h.sigfig())
    );
    s
}

/// HdrHistogram's sub-bucket count for a precision: the smallest power of two
/// that holds 2 × 10^sigfig distinct values.
fn sub_buckets(sigfig: u8) -> u64 {
    (2 * 10u64.pow(u32::from(sigfig))).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ends_at_100_percent_with_the_total_count() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 10_000).unwrap();
        }
        let text = hgrm_text(&h);
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with(['#', ' ']))
            .collect();
        assert!(rows.is_empty(), "every row is right-aligned: {rows:?}");
        let last_row = text
            .lines()
            .rfind(|l| !l.starts_with('#') && !l.trim().is_empty())
            .unwrap();
        let cols: Vec<&str> = last_row.split_whitespace().collect();
        assert_eq!(cols, ["10.002", "1.000000000000", "1000"], "{last_row}");
        assert!(text.contains("Total count    =         1000]"), "{text}");
        assert!(text.contains("SubBuckets     =         2048]"), "{text}");
        assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
    }
}

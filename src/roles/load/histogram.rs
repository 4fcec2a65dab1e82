//! Latency histograms: creation with the loader's bounds, the portable
//! serialization the orchestrator merges across rounds, and summaries.
//!
//! Owns: the unit (nanoseconds: latency is recorded at the clock's
//! resolution, never truncated to whole µs), the range and precision of
//! every latency histogram, and the V2+deflate+base64 encoding. Summaries
//! are in µs, rounded to the nearest (and the mean exact). Must not: know about
//! connections or reports beyond [`LatencySummary`].

use anyhow::Context;
use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Largest latency the histograms hold: one hour in nanoseconds. Anything
/// longer is clamped to it (a run is bounded far below this anyway).
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;
/// Histogram values are ns; summaries are µs.
pub const NS_PER_US: u64 = 1_000;

/// A histogram value (ns) in whole µs, rounded to the nearest.
pub fn ns_to_us(ns: u64) -> u64 {
    (ns + NS_PER_US / 2) / NS_PER_US
}
/// Significant decimal digits kept: 3 means 0.1% relative precision.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// An empty latency histogram with the loader's bounds (values in ns).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Serialize with hdrhistogram's V2 + deflate format, then base64 (standard
/// alphabet, padded): what `LatencySummary::histogram` carries.
pub fn encode(hist: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(hist, &mut bytes)
        .expect("serializing into a Vec cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decode a histogram produced by [`encode`] (or any V2 / V2+deflate
/// histogram in base64), for merging rounds and writing .hgrm files.
pub fn decode(encoded: &str) -> anyhow::Result<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .context("latency histogram is not valid base64")?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| anyhow::anyhow!("latency histogram is not a V2 HdrHistogram: {e:?}"))
}

/// Summary of one latency distribution, microseconds throughout (the
/// histogram itself holds nanoseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LatencySummary {
    /// Number of latencies recorded.
    pub count: u64,
    /// Smallest latency, µs.
    pub min_us: u64,
    /// Mean latency, µs.
    pub mean_us: f64,
    /// Standard deviation of latency, µs.
    pub stdev_us: f64,
    /// Largest latency, µs.
    pub max_us: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 75th percentile, µs.
    pub p75_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p99_9_us: u64,
    /// 99.99th percentile, µs.
    pub p99_99_us: u64,
    /// The whole histogram (values in **ns**): HdrHistogram V2 + deflate,
    /// base64. Decode with `fairground::roles::load::decode_histogram`.
    pub histogram: String,
}

impl LatencySummary {
    /// Summarize `hist` (values in ns).
    pub fn of(hist: &Histogram<u64>) -> Self {
        let q = |p: f64| ns_to_us(hist.value_at_quantile(p));
        let us = NS_PER_US as f64;
        Self {
            count: hist.len(),
            min_us: if hist.is_empty() {
                0
            } else {
                ns_to_us(hist.min())
            },
            mean_us: hist.mean() / us,
            stdev_us: hist.stdev() / us,
            max_us: ns_to_us(hist.max()),
            p50_us: q(0.50),
            p75_us: q(0.75),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            p99_99_us: q(0.9999),
            histogram: encode(hist),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_histogram_decodes_to_the_same_counts() {
        let mut h = new_histogram();
        for v in [1u64, 17, 250, 250, 9_000, 1_234_567] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), 6);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert_eq!(back.max(), h.max());
        assert!(decode("not base64!").is_err());
    }

    #[test]
    fn summary_of_empty_histogram_is_all_zero() {
        let s = LatencySummary::of(&new_histogram());
        assert_eq!((s.count, s.min_us, s.max_us, s.p99_us), (0, 0, 0, 0));
    }
}

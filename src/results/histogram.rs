//! Latency histograms as they travel in results: HdrHistogram V2 + deflate,
//! base64 encoded (the format HdrHistogram's own tools read), plus merging and
//! the percentile summary every round and cell carries.
//!
//! All values are microseconds. This module does no I/O.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Why a histogram string could not be used.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    /// The string is not valid base64.
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The bytes are not a V2 (deflate) HdrHistogram.
    #[error("histogram bytes are not an HdrHistogram V2 encoding: {0:?}")]
    Decode(hdrhistogram::serialization::DeserializeError),
    /// Serialising failed (should not happen for an in-memory histogram).
    #[error("cannot encode histogram: {0:?}")]
    Encode(hdrhistogram::serialization::V2DeflateSerializeError),
    /// Two histograms could not be added (incompatible ranges).
    #[error("cannot merge histograms: {0:?}")]
    Merge(hdrhistogram::errors::AdditionError),
}

/// Encode as base64 of the V2 + deflate serialisation.
pub fn encode(h: &Histogram<u64>) -> Result<String, HistogramError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(HistogramError::Encode)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Decode a string made by [`encode`] (or by any HdrHistogram V2 writer).
pub fn decode(s: &str) -> Result<Histogram<u64>, HistogramError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s.trim())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(HistogramError::Decode)
}

/// Sum of several encoded histograms (auto-resizing, so ranges may differ).
/// An empty iterator yields an empty histogram.
pub fn merge<'a>(
    parts: impl IntoIterator<Item = &'a str>,
) -> Result<Histogram<u64>, HistogramError> {
    let mut total = Histogram::<u64>::new(3).expect("3 significant figures is valid");
    total.auto(true);
    for part in parts {
        total.add(decode(part)?).map_err(HistogramError::Merge)?;
    }
    Ok(total)
}

/// Latency percentiles of a histogram, microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Latency {
    /// Number of latencies recorded (completed responses of any status).
    pub count: u64,
    /// Mean latency, µs.
    pub mean_us: f64,
    /// Standard deviation of latency, µs.
    pub stdev_us: f64,
    /// Median (50th percentile), µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Largest latency recorded, µs.
    pub max_us: u64,
}

impl Latency {
    /// Summarise `h` (values in µs). An empty histogram gives all zeros.
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            count: h.len(),
            mean_us: h.mean(),
            stdev_us: h.stdev(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn round_trips_through_base64() {
        let h = sample(&[100, 200, 300, 5_000]);
        let back = decode(&encode(&h).unwrap()).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), h.max());
    }

    #[test]
    fn merge_adds_counts_of_every_part() {
        let a = encode(&sample(&[100; 10])).unwrap();
        let b = encode(&sample(&[1_000_000; 5])).unwrap();
        let m = merge([a.as_str(), b.as_str()]).unwrap();
        assert_eq!(m.len(), 15);
        let lat = Latency::of(&m);
        assert_eq!(lat.p50_us, 100);
        assert!(lat.max_us >= 1_000_000 && lat.max_us < 1_001_000, "{lat:?}");
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(decode("!!!"), Err(HistogramError::Base64(_))));
        assert!(matches!(decode("AAAA"), Err(HistogramError::Decode(_))));
    }
}

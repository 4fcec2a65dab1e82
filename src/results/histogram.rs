//! Latency histograms as they travel in results: HdrHistogram V2 + deflate,
//! base64 encoded (the format HdrHistogram's own tools read), plus merging and
//! the percentile summary every round and cell carries.
//!
//! Histogram values are nanoseconds (the loader's resolution); the
//! summaries are microseconds. Runs of results schema 2 held µs histograms
//! and are converted on reading ([`scale`]). This module does no I/O.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::roles::load::histogram::ns_to_us;

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

/// Re-record every value of an encoded histogram multiplied by `factor`:
/// how a results file of schema 2 (µs histograms) is read into this
/// version's ns histograms.
pub fn scale(s: &str, factor: u64) -> Result<String, HistogramError> {
    let h = decode(s)?;
    let mut out = Histogram::<u64>::new(3).expect("3 significant figures is valid");
    out.auto(true);
    for v in h.iter_recorded() {
        out.record_n(
            h.median_equivalent(v.value_iterated_to()) * factor,
            v.count_at_value(),
        )
        .expect("auto-resizing histogram takes any value");
    }
    encode(&out)
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

/// Latency percentiles of a cell's or round's window requests,
/// microseconds.
///
/// The histogram holds the answered requests; `beyond_timeout` counts the
/// window requests whose latency is only known to exceed `timeout_us`
/// (timed out, still in flight when the drain ended, never sent). Each
/// percentile ranks over both: where it falls among the slow ones it is
/// `None` and reads "> timeout", never a number taken from the survivors
/// (with 0.2% of requests timed out, p99.9 of the answered alone would hide
/// every one of them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Latency {
    /// Latencies recorded: answered window requests of any status.
    pub count: u64,
    /// Window requests known to be slower than `timeout_us` (not in the
    /// histogram): timed out, in flight at the drain's end, never sent.
    #[serde(default)]
    pub beyond_timeout: u64,
    /// The per-request timeout, µs (the bound `beyond_timeout` exceeds).
    #[serde(default)]
    pub timeout_us: Option<u64>,
    /// Mean latency of the answered requests, µs.
    pub mean_us: f64,
    /// Standard deviation of latency of the answered requests, µs.
    pub stdev_us: f64,
    /// Median (50th percentile), µs; `None`: above the timeout.
    pub p50_us: Option<u64>,
    /// 90th percentile, µs; `None`: above the timeout.
    pub p90_us: Option<u64>,
    /// 99th percentile, µs; `None`: above the timeout.
    pub p99_us: Option<u64>,
    /// 99.9th percentile, µs; `None`: above the timeout.
    pub p999_us: Option<u64>,
    /// Largest latency, µs; `None`: some request was slower than the
    /// timeout.
    pub max_us: Option<u64>,
}

impl Latency {
    /// Summarise `h` (answered requests, values in ns) with `beyond` more
    /// requests known to exceed `timeout_us`. Nothing at all gives zeros.
    pub fn of(h: &Histogram<u64>, beyond: u64, timeout_us: Option<u64>) -> Latency {
        let answered = h.len();
        let total = answered + beyond;
        if total == 0 {
            return Latency {
                timeout_us,
                ..Latency::default()
            };
        }
        // The rank of quantile q over every window request; past the
        // answered ones it lies among the requests slower than the timeout.
        let q = |p: f64| -> Option<u64> {
            let rank = (p * total as f64).ceil().max(1.0) as u64;
            (rank <= answered).then(|| ns_to_us(h.value_at_quantile(rank as f64 / answered as f64)))
        };
        let us = crate::roles::load::histogram::NS_PER_US as f64;
        Latency {
            count: answered,
            beyond_timeout: beyond,
            timeout_us,
            mean_us: if answered > 0 { h.mean() / us } else { 0.0 },
            stdev_us: if answered > 0 { h.stdev() / us } else { 0.0 },
            p50_us: q(0.50),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: (beyond == 0 && answered > 0).then(|| ns_to_us(h.max())),
        }
    }

    /// A percentile of this summary for a reader: `1.66 ms`, or `> 5.00 s`
    /// when it lies among the requests slower than the timeout, or `–`.
    pub fn show(&self, value: Option<u64>) -> String {
        match (value, self.timeout_us) {
            (Some(v), _) => crate::units::micros(v as f64),
            (None, Some(t)) if self.beyond_timeout > 0 => {
                format!("> {}", crate::units::micros(t as f64))
            }
            (None, _) => "–".into(),
        }
    }

    /// A percentile as a number to sort or chart by: above the timeout
    /// sorts last (infinite); unknown is `None`.
    pub fn rank_value(&self, value: Option<u64>) -> Option<f64> {
        match value {
            Some(v) => Some(v as f64),
            None if self.beyond_timeout > 0 => Some(f64::INFINITY),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A histogram of `values` given in µs (recorded in ns, as the loader does).
    fn sample(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for &v in values {
            h.record(v * 1000).unwrap();
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
        let lat = Latency::of(&m, 0, None);
        assert_eq!(lat.p50_us, Some(100));
        let max = lat.max_us.unwrap();
        assert!((1_000_000..1_001_000).contains(&max), "{lat:?}");
    }

    #[test]
    fn percentiles_count_requests_slower_than_the_timeout() {
        // 996 answered at 1 ms, 4 timed out at 5 s: 0.4% beyond the
        // timeout, so p99 is still an answer but p99.9 is "> 5 s".
        let h = sample(&[1_000; 996]);
        let lat = Latency::of(&h, 4, Some(5_000_000));
        assert_eq!(lat.p99_us, Some(1_000));
        assert_eq!(lat.p999_us, None);
        assert_eq!(lat.max_us, None);
        assert_eq!(lat.show(lat.p999_us), "> 5.00 s");
        assert_eq!(lat.show(lat.p99_us), "1.00 ms");
        assert_eq!(lat.rank_value(lat.p999_us), Some(f64::INFINITY));
        // The answered alone would have said 1 ms at every percentile.
        assert_eq!(Latency::of(&h, 0, Some(5_000_000)).p999_us, Some(1_000));
        // More than half beyond: even the median is "> timeout".
        let lat = Latency::of(&sample(&[1_000; 10]), 11, Some(2_000_000));
        assert_eq!((lat.p50_us, lat.count, lat.beyond_timeout), (None, 10, 11));
        // Nothing measured: zeros and no figure, never a made-up one.
        let none = Latency::of(&sample(&[]), 0, None);
        assert_eq!((none.p50_us, none.show(none.p50_us).as_str()), (None, "–"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(decode("!!!"), Err(HistogramError::Base64(_))));
        assert!(matches!(decode("AAAA"), Err(HistogramError::Decode(_))));
    }
}

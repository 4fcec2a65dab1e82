//! Quantities for people: the one formatter of each kind (counts, latencies,
//! sizes, fractions), used by the reports, the terminal and every command's
//! output alike. Every figure carries its unit, at a precision that does not
//! pretend to more than was measured.

/// Whole number with thousands separators: `120,600`.
pub fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A latency given in µs, in the unit that keeps 3 significant digits:
/// `835 µs`, `1.66 ms`, `2.21 s`.
pub fn micros(us: f64) -> String {
    if !us.is_finite() {
        return "–".into();
    }
    // Decide the unit on the rounded value: 999.6 µs is `1.00 ms`, not
    // `1000 µs`.
    if us.round() < 1_000.0 {
        format!("{us:.0} µs")
    } else if (us / 1_000.0 * 100.0).round() / 100.0 < 1_000.0 {
        format!("{} ms", sig3(us / 1_000.0))
    } else {
        format!("{} s", sig3(us / 1_000_000.0))
    }
}

/// Bytes in binary units: `3.39 MiB`, `512 B`.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{} {}", sig3(v), UNITS[unit])
    }
}

/// A fraction as a percentage with one decimal: `4.9%`.
pub fn percent(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// `value` and `limit` with `min_decimals` decimals, or more until they
/// print differently (at most 6): a figure that failed its threshold never
/// reads as equal to it.
pub fn numbers_apart(value: f64, limit: f64, min_decimals: usize) -> (String, String) {
    let mut d = min_decimals;
    loop {
        let (v, l) = (format!("{value:.d$}"), format!("{limit:.d$}"));
        if v != l || value == limit || d >= 6 {
            return (v, l);
        }
        d += 1;
    }
}

/// Two fractions as percentages with one decimal, or more until they print
/// differently: `0.104%` against `0.100%`, not `0.1%` against `0.1%`.
pub fn percents_apart(value: f64, limit: f64) -> (String, String) {
    let (v, l) = numbers_apart(value * 100.0, limit * 100.0, 1);
    (format!("{v}%"), format!("{l}%"))
}

/// Three significant digits, no exponent: 1.66, 16.6, 166. The digits are
/// chosen on the rounded value, so 9.996 prints `10.0`, not `10.00`.
pub fn sig3(v: f64) -> String {
    let round_to = |d: i32| (v * 10f64.powi(d)).round() / 10f64.powi(d);
    if round_to(1).abs() >= 100.0 {
        format!("{v:.0}")
    } else if round_to(2).abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_carry_units() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(micros(835.0), "835 µs");
        assert_eq!(micros(1_658.0), "1.66 ms");
        assert_eq!(micros(2_211_839.0), "2.21 s");
        assert_eq!(bytes(3_555_328.0), "3.39 MiB");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(percent(0.049), "4.9%");
        assert_eq!(micros(999.6), "1.00 ms");
        assert_eq!(
            percents_apart(0.00104, 0.001),
            ("0.104%".to_string(), "0.100%".to_string())
        );
        assert_eq!(percents_apart(0.5, 0.9), ("50.0%".into(), "90.0%".into()));
        assert_eq!(
            numbers_apart(0.504, 0.5, 2),
            ("0.504".into(), "0.500".into())
        );
        assert_eq!(micros(999_996.0), "1.00 s");
        assert_eq!(sig3(9.996), "10.0");
        assert_eq!(bytes(1023.9 * 1024.0), "1024 KiB");
    }
}

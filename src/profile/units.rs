//! Units a profile is written in: durations (`5s`, `1m30s`) and sizes
//! (`512MiB`); CPU lists (`0-3,6`) are `host::CoreList`. Each is a small newtype that parses from YAML,
//! prints back in the same notation (so `profile show` output is itself a
//! valid profile) and describes itself in the JSON Schema.
//!
//! Parsing only: whether a value is sensible (non-zero, above a floor) is
//! decided in `validate.rs`, where the field's location is known.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as a humantime string: `500ms`, `5s`, `1m30s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Human(pub Duration);

impl Human {
    /// Whole seconds, for convenience in tests and plans.
    pub const fn secs(s: u64) -> Self {
        Human(Duration::from_secs(s))
    }
}

impl FromStr for Human {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.starts_with('-') {
            return Err(format!(
                "`{s}` is negative; a duration is a length of time like `5s`"
            ));
        }
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return Err(format!(
                "`{s}` has no unit; write a duration like `{t}s` or `1m30s`"
            ));
        }
        humantime::parse_duration(t)
            .map(Human)
            .map_err(|e| format!("`{s}` is not a duration like `5s` or `1m30s` ({e})"))
    }
}

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_zero() {
            return f.write_str("0s");
        }
        write!(f, "{}", humantime::format_duration(self.0)).map(|_| ())
    }
}

/// Shared visitor for scalar newtypes: accept strings and plain numbers,
/// hand the text to `FromStr`, and turn its message into a serde error (which
/// serde-saphyr tags with the scalar's location).
struct ScalarVisitor<T>(&'static str, std::marker::PhantomData<T>);

impl<T> de::Visitor<'_> for ScalarVisitor<T>
where
    T: FromStr<Err = String>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
}

fn scalar<'de, D: Deserializer<'de>, T: FromStr<Err = String>>(
    d: D,
    what: &'static str,
) -> Result<T, D::Error> {
    d.deserialize_any(ScalarVisitor(what, std::marker::PhantomData))
}

impl<'de> Deserialize<'de> for Human {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        scalar(d, "a duration like `5s` or `1m30s`")
    }
}

impl Serialize for Human {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl schemars::JsonSchema for Human {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration: a number with a unit, combinable (`500ms`, `5s`, `1m30s`, `2h`).",
            "pattern": "^\\s*([0-9]+(\\.[0-9]+)?\\s*[a-zµ]+\\s*)+$"
        })
    }
}

/// An amount of memory in bytes, written `512MiB`, `1GiB`, `1.5GiB`, `500MB`
/// or a plain number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

const KIB: u64 = 1024;
const MIB: u64 = KIB * 1024;
const GIB: u64 = MIB * 1024;
const TIB: u64 = GIB * 1024;

/// Units accepted after a number, longest first within each family.
/// Binary (IEC) units are what Docker's `--memory` means by `m`/`g`; decimal
/// units are accepted because people write them, and mean what they say.
const BYTE_UNITS: &[(&str, u64)] = &[
    ("KiB", KIB),
    ("MiB", MIB),
    ("GiB", GIB),
    ("TiB", TIB),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("B", 1),
];

impl FromStr for Bytes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let bad = || format!("`{s}` is not a size like `512MiB`, `1GiB` or a number of bytes");
        if t.starts_with('-') {
            return Err(format!(
                "`{s}` is negative; a size is an amount like `512MiB`"
            ));
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let unit = unit.trim();
        let mult = if unit.is_empty() {
            1
        } else {
            BYTE_UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map(|(_, m)| *m)
                .ok_or_else(|| {
                    let hint = crate::profile::suggest(
                        unit,
                        BYTE_UNITS.iter().map(|(u, _)| *u),
                    )
                    .map(|u| format!(" (did you mean `{u}`?)"))
                    .unwrap_or_default();
                    format!("{}: unknown unit `{unit}`{hint}; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB", bad())
                })?
        };
        if num.is_empty() {
            return Err(bad());
        }
        let value = if num.contains('.') {
            let f: f64 = num.parse().map_err(|_| bad())?;
            let bytes = f * mult as f64;
            if !bytes.is_finite() || bytes > u64::MAX as f64 {
                return Err(format!("`{s}` is too large"));
            }
            bytes.round() as u64
        } else {
            let n: u64 = num.parse().map_err(|_| bad())?;
            n.checked_mul(mult)
                .ok_or_else(|| format!("`{s}` is too large"))?
        };
        Ok(Bytes(value))
    }
}

impl fmt::Display for Bytes {
    /// The largest binary unit that divides the value exactly, so the printed
    /// form parses back to the same number of bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, mult) in [("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)] {
            if self.0 != 0 && self.0 % mult == 0 {
                return write!(f, "{}{unit}", self.0 / mult);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        scalar(d, "a size like `512MiB` or `1GiB`")
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl schemars::JsonSchema for Bytes {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Size".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An amount of memory: `512MiB`, `1GiB`, `1.5GiB`, `500MB`, or a number of bytes.",
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)?\\s*$"}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_humantime_durations() {
        assert_eq!("5s".parse::<Human>().unwrap(), Human::secs(5));
        assert_eq!("1m30s".parse::<Human>().unwrap(), Human::secs(90));
        assert_eq!(
            "250ms".parse::<Human>().unwrap(),
            Human(Duration::from_millis(250))
        );
        assert_eq!("0s".parse::<Human>().unwrap(), Human::secs(0));
    }

    #[test]
    fn rejects_negative_and_unitless_durations_with_a_hint() {
        assert!("-5s".parse::<Human>().unwrap_err().contains("negative"));
        assert!("5".parse::<Human>().unwrap_err().contains("`5s`"));
        assert!("fast"
            .parse::<Human>()
            .unwrap_err()
            .contains("not a duration"));
    }

    #[test]
    fn durations_print_back_in_the_same_notation() {
        for text in ["5s", "1m 30s", "250ms", "0s", "2h"] {
            let d: Human = text.parse().unwrap();
            assert_eq!(d.to_string().parse::<Human>().unwrap(), d, "{text}");
        }
        assert_eq!(Human::secs(90).to_string(), "1m 30s");
    }

    #[test]
    fn parses_binary_and_decimal_sizes() {
        assert_eq!("512MiB".parse::<Bytes>().unwrap(), Bytes(512 * MIB));
        assert_eq!("1GiB".parse::<Bytes>().unwrap(), Bytes(GIB));
        assert_eq!("1.5GiB".parse::<Bytes>().unwrap(), Bytes(GIB + GIB / 2));
        assert_eq!("500MB".parse::<Bytes>().unwrap(), Bytes(500_000_000));
        assert_eq!("4096".parse::<Bytes>().unwrap(), Bytes(4096));
        assert_eq!(" 2 GiB ".parse::<Bytes>().unwrap(), Bytes(2 * GIB));
    }

    #[test]
    fn rejects_bad_sizes_and_suggests_the_unit() {
        assert!("-1GiB".parse::<Bytes>().unwrap_err().contains("negative"));
        let err = "1Gib".parse::<Bytes>().unwrap_err();
        assert!(err.contains("did you mean `GiB`?"), "{err}");
        assert!("GiB".parse::<Bytes>().is_err());
        assert!("99999999999TiB"
            .parse::<Bytes>()
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn sizes_print_in_the_largest_exact_unit() {
        assert_eq!(Bytes(GIB).to_string(), "1GiB");
        assert_eq!(Bytes(1536 * MIB).to_string(), "1536MiB");
        assert_eq!(Bytes(1000).to_string(), "1000B");
        assert_eq!(Bytes(0).to_string(), "0B");
    }
}

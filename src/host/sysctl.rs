//! Network sysctls: the one type for a set of them ([`Sysctls`], name →
//! value as `/proc/sys` writes it), whether a profile asks for them, Docker
//! sets them on a container, or preflight reads them from a namespace.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// `net.core.somaxconn`: cap on every listen backlog.
pub const SOMAXCONN: &str = "net.core.somaxconn";
/// `net.ipv4.tcp_max_syn_backlog`: half-open connections queued.
pub const TCP_MAX_SYN_BACKLOG: &str = "net.ipv4.tcp_max_syn_backlog";
/// `net.ipv4.ip_local_port_range`: ephemeral ports, `LOW HIGH`.
pub const IP_LOCAL_PORT_RANGE: &str = "net.ipv4.ip_local_port_range";
/// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 loopback only.
pub const TCP_TW_REUSE: &str = "net.ipv4.tcp_tw_reuse";

/// The sysctls preflight judges (the ones a high connection count needs).
pub const JUDGED: [&str; 4] = [
    SOMAXCONN,
    TCP_MAX_SYN_BACKLOG,
    IP_LOCAL_PORT_RANGE,
    TCP_TW_REUSE,
];

/// A set of sysctls, by dotted name (`net.core.somaxconn`), values as the
/// kernel prints them (whitespace between fields of multi-field values).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Sysctls(pub BTreeMap<String, String>);

impl Sysctls {
    /// A set from `(name, value)` pairs.
    pub fn of(pairs: &[(&str, &str)]) -> Sysctls {
        Sysctls(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Read `names` from `root`/proc/sys (the reading process's own network
    /// namespace). Errors, naming the folder, when none is readable.
    pub fn read(root: &Path, names: &[&str]) -> anyhow::Result<Sysctls> {
        let sys = root.join("proc/sys");
        let mut out = BTreeMap::new();
        for name in names {
            let file = sys.join(name.replace('.', "/"));
            if let Ok(text) = std::fs::read_to_string(&file) {
                out.insert(name.to_string(), normalize(&text));
            }
        }
        if out.is_empty() {
            anyhow::bail!(
                "no network sysctl readable under {} (is /proc mounted?)",
                sys.display()
            );
        }
        Ok(Sysctls(out))
    }

    /// Whether no sysctl is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The value of `name` as a whole number.
    pub fn int(&self, name: &str) -> Option<u64> {
        self.get(name)?.trim().parse().ok()
    }

    /// `net.ipv4.ip_local_port_range` as (low, high).
    pub fn port_range(&self) -> Option<(u16, u16)> {
        parse_port_range(self.get(IP_LOCAL_PORT_RANGE)?).ok()
    }

    /// Set `name` to `value`.
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.0.insert(name.to_string(), value.into());
    }

    /// Every `(name, value)`, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Fields separated by one space, as Docker and profiles write them (the
/// kernel separates `ip_local_port_range` with a tab).
fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `"LOW HIGH"` → (low, high), 1 ≤ low ≤ high ≤ 65535.
pub fn parse_port_range(v: &str) -> Result<(u16, u16), String> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    let bad = || format!("`{v}` is not a port range `LOW HIGH` with 1 ≤ LOW ≤ HIGH ≤ 65535");
    let [lo, hi] = parts[..] else {
        return Err(bad());
    };
    let lo: u16 = lo.parse().map_err(|_| bad())?;
    let hi: u16 = hi.parse().map_err(|_| bad())?;
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_sys_and_parses_values() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            format!("{}", Sysctls::read(dir.path(), &JUDGED).unwrap_err()).contains("proc/sys")
        );
        let f = dir.path().join("proc/sys/net/ipv4/ip_local_port_range");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, "32768\t60999\n").unwrap();
        let s = Sysctls::read(dir.path(), &JUDGED).unwrap();
        assert_eq!(s.get(IP_LOCAL_PORT_RANGE), Some("32768 60999"));
        assert_eq!(s.port_range(), Some((32768, 60999)));
        assert_eq!(s.int(SOMAXCONN), None);
    }

    #[test]
    fn port_ranges_must_ascend_from_one() {
        assert_eq!(parse_port_range("1024 65535"), Ok((1024, 65535)));
        assert!(parse_port_range("0 10").is_err());
        assert!(parse_port_range("10 9").is_err());
        assert!(parse_port_range("10").is_err());
    }

    #[test]
    fn serializes_as_a_plain_map() {
        let s = Sysctls::of(&[(SOMAXCONN, "1024")]);
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"net.core.somaxconn":"1024"}"#
        );
        assert_eq!(s.int(SOMAXCONN), Some(1024));
    }
}

//! NIC: the driver behind each network interface, and which interface the
//! run's traffic crosses.
//!
//! A fully emulated NIC (e1000 in a VM) costs a VM exit per register access
//! and capped the Hical write-up's throughput; paravirtual drivers (virtio_net,
//! vmxnet3, hv_netvsc, ena, gve) and physical ones do not. A local run's
//! traffic never touches a NIC: loader and server talk over a Docker bridge.

use std::fs;

use super::{virt, Check, CheckStatus, Env, Family, Judgement};

/// Drivers of NICs a hypervisor emulates register by register. On bare
/// metal e1000e is also Intel's driver for real NICs, so these count as
/// emulated only under a hypervisor.
pub const EMULATED_DRIVERS: [&str; 6] = [
    "e1000", "e1000e", "8139cp", "8139too", "pcnet32", "ne2k-pci",
];

/// One interface with a device behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// Interface name (`eth0`).
    pub name: String,
    /// Driver (basename of `device/driver`).
    pub driver: String,
}

/// Interfaces under /sys/class/net that have a device (physical or virtual
/// NIC); bridges, veths, loopback and ifb have none and are left out.
pub fn nics(env: &Env<'_>) -> Vec<Nic> {
    let Ok(entries) = fs::read_dir(env.path("/sys/class/net")) else {
        return Vec::new();
    };
    let mut out: Vec<Nic> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let link = fs::read_link(e.path().join("device/driver")).ok()?;
            let driver = link.file_name()?.to_string_lossy().to_string();
            Some(Nic { name, driver })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The interface of the default route (`/proc/net/route`), if any.
pub fn default_route_iface(env: &Env<'_>) -> Option<String> {
    env.read("/proc/net/route")?.lines().skip(1).find_map(|l| {
        let mut f = l.split_whitespace();
        let iface = f.next()?;
        (f.next()? == "00000000").then(|| iface.to_string())
    })
}

/// The interface of the most specific route to `addr` in the main table
/// (`/proc/net/route`: longest prefix, then lowest metric), and the route
/// as `a.b.c.d/len`. On the server's host the route to its own address is
/// the connected route of the interface holding it.
pub fn route_iface(env: &Env<'_>, addr: std::net::Ipv4Addr) -> Option<(String, String)> {
    let target = u32::from(addr);
    // Fields are the address's bytes as stored (network order) printed as
    // a native u32.
    let hex = |s: &str| {
        u32::from_str_radix(s, 16)
            .ok()
            .map(|v| u32::from_be_bytes(v.to_ne_bytes()))
    };
    env.read("/proc/net/route")?
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (iface, dest, metric, mask) =
                (f.first()?, hex(f.get(1)?)?, f.get(6)?, hex(f.get(7)?)?);
            let metric: u32 = metric.parse().ok()?;
            (target & mask == dest & mask)
                .then(|| (mask.count_ones(), metric, iface.to_string(), dest))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(len, _, iface, dest)| (iface, format!("{}/{len}", std::net::Ipv4Addr::from(dest))))
}

/// The interface the run's traffic crosses on this host: the route to
/// `traffic_to`, else the default route.
pub fn traffic_iface(env: &Env<'_>) -> Option<(String, String)> {
    match env.input.traffic_to {
        Some(addr) => route_iface(env, addr).map(|(i, r)| (i, format!("route {r}"))),
        None => default_route_iface(env).map(|i| (i, "default route".to_string())),
    }
}

/// Where the run's traffic flows, in words.
pub fn traffic_path(env: &Env<'_>) -> String {
    if env.input.remote_loader {
        let to = env
            .input
            .traffic_to
            .map(|a| format!(" to {a}"))
            .unwrap_or_default();
        match traffic_iface(env) {
            Some((i, route)) => format!("across hosts: traffic{to} crosses {i} ({route})"),
            None => format!("across hosts: no route{to} found"),
        }
    } else if env.input.host_network {
        "local, host network: loader and server talk over loopback (lo), no NIC crossed".into()
    } else {
        "local: loader and server containers on a Docker bridge (veth pairs), no NIC crossed".into()
    }
}

/// `nic.driver`: every NIC's driver; the one the traffic crosses decides.
pub struct NicDriver;

impl Check for NicDriver {
    fn id(&self) -> &'static str {
        "nic.driver"
    }
    fn family(&self) -> Family {
        Family::Nic
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "a fully emulated NIC (e1000) costs a VM exit per register access and caps \
                   throughput; it voids every figure whose traffic crosses it";
        let threshold = "in a VM: e1000/e1000e fail when the run's traffic crosses it (remote \
                         loader), warn otherwise; virtio_net, vmxnet3, hv_netvsc, ena, gve and \
                         physical drivers pass";
        let remedy = "give the VM a paravirtual NIC (virtio-net, vmxnet3, hv_netvsc) instead of \
                      the emulated e1000";
        let in_vm = virt::detect(env).hypervisor.is_some();
        let traffic_iface = env
            .input
            .remote_loader
            .then(|| traffic_iface(env).map(|(i, _)| i))
            .flatten();
        let list = nics(env);
        if list.is_empty() {
            return Judgement::new(
                CheckStatus::Pass,
                format!("no NIC with a driver; {}", traffic_path(env)),
                threshold,
                why,
                remedy,
            );
        }
        let mut verdict = CheckStatus::Pass;
        let mut parts = Vec::new();
        for n in &list {
            let carries = traffic_iface.as_deref() == Some(n.name.as_str());
            let emulated = in_vm && EMULATED_DRIVERS.contains(&n.driver.as_str());
            let v = match (emulated, carries) {
                (true, true) => CheckStatus::Fail,
                (true, false) => CheckStatus::Warn,
                _ => CheckStatus::Pass,
            };
            verdict = verdict.max(v);
            parts.push(format!(
                "{}: {}{}{}",
                n.name,
                n.driver,
                if emulated { " (emulated)" } else { "" },
                if carries {
                    ", carries the run's traffic"
                } else {
                    ""
                }
            ));
        }
        Judgement::new(
            verdict,
            format!("{}; {}", parts.join(", "), traffic_path(env)),
            threshold,
            why,
            remedy,
        )
    }
}

/// The checks of this family.
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![Box::new(NicDriver)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::{DockerFacts, MeasuredFacts, PreflightInput};

    #[test]
    fn default_route_is_the_zero_destination_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/net")).unwrap();
        std::fs::write(
            dir.path().join("proc/net/route"),
            "Iface\tDestination\tGateway\tFlags\n\
             docker0\t000011AC\t00000000\t0001\n\
             ens5\t00000000\t0100A8C0\t0003\n",
        )
        .unwrap();
        let input = PreflightInput {
            remote_loader: true,
            ..PreflightInput::default()
        };
        let (probes, docker) = (MeasuredFacts::default(), DockerFacts::default());
        let env = Env {
            root: dir.path(),
            input: &input,
            probes: &probes,
            docker: &docker,
        };
        assert_eq!(default_route_iface(&env).as_deref(), Some("ens5"));
        assert_eq!(
            traffic_path(&env),
            "across hosts: traffic crosses ens5 (default route)"
        );
    }

    #[test]
    fn the_route_to_the_server_picks_the_most_specific_interface() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/net")).unwrap();
        // Default via ens5; 10.1.0.0/16 on ens6; 10.1.2.0/24 on ens7; the
        // real file has 11 columns (Mask is the 8th).
        std::fs::write(
            dir.path().join("proc/net/route"),
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
             ens5\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
             ens6\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
             ens7\t0002010A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
        )
        .unwrap();
        let input = PreflightInput {
            remote_loader: true,
            traffic_to: Some("10.1.2.9".parse().unwrap()),
            ..PreflightInput::default()
        };
        let (probes, docker) = (MeasuredFacts::default(), DockerFacts::default());
        let env = Env {
            root: dir.path(),
            input: &input,
            probes: &probes,
            docker: &docker,
        };
        let at = |a: &str| route_iface(&env, a.parse().unwrap());
        assert_eq!(at("10.1.2.9"), Some(("ens7".into(), "10.1.2.0/24".into())));
        assert_eq!(at("10.1.9.9"), Some(("ens6".into(), "10.1.0.0/16".into())));
        assert_eq!(at("192.0.2.1"), Some(("ens5".into(), "0.0.0.0/0".into())));
        assert_eq!(
            traffic_path(&env),
            "across hosts: traffic to 10.1.2.9 crosses ens7 (route 10.1.2.0/24)"
        );
    }
}

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

/// Where the run's traffic flows, in words.
pub fn traffic_path(env: &Env<'_>) -> String {
    if env.input.remote_loader {
        match default_route_iface(env) {
            Some(i) => format!("remote loader: traffic crosses {i} (default route)"),
            None => "remote loader: no default route found".into(),
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
            .then(|| default_route_iface(env))
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
            "remote loader: traffic crosses ens5 (default route)"
        );
    }
}

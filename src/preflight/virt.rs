//! Virtualization: is this bare metal, a container or a VM, which hypervisor,
//! and what does a trip to the hypervisor cost right now.
//!
//! Evidence, strongest first: CPUID (leaf 1 hypervisor bit, leaf 0x40000000
//! signature, from [`MeasuredFacts`](super::MeasuredFacts)), DMI strings under
//! /sys/class/dmi/id, /sys/hypervisor, container markers. The measured exit
//! cost catches what no string shows: a hypervisor on its slow path (the
//! Hical write-up lost 4x to VirtualBox running on Hyper-V).

use std::fs;

use super::{Check, CheckStatus, Env, Family, Judgement};

/// A hypervisor, as CPUID or DMI name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hypervisor {
    /// Linux KVM (also Firecracker, cloud-hypervisor, QEMU with -accel kvm).
    Kvm,
    /// Microsoft Hyper-V (also Azure).
    HyperV,
    /// VMware ESXi / Workstation.
    VMware,
    /// Xen (HVM or PV).
    Xen,
    /// QEMU without acceleration: every instruction is emulated.
    Tcg,
    /// FreeBSD bhyve.
    Bhyve,
    /// Oracle VirtualBox.
    VirtualBox,
    /// Parallels Desktop.
    Parallels,
    /// ACRN.
    Acrn,
    /// A signature fairground does not know.
    Unknown(String),
}

impl Hypervisor {
    /// The hypervisor a CPUID leaf 0x40000000 signature names.
    pub fn from_signature(sig: &str) -> Option<Self> {
        let s = sig.trim_matches(|c: char| c == '\0' || c.is_whitespace());
        if s.is_empty() {
            return None;
        }
        Some(match s {
            "KVMKVMKVM" => Self::Kvm,
            "Microsoft Hv" => Self::HyperV,
            "VMwareVMware" => Self::VMware,
            "XenVMMXenVMM" => Self::Xen,
            "TCGTCGTCGTCG" => Self::Tcg,
            "bhyve bhyve" => Self::Bhyve,
            "VBoxVBoxVBox" => Self::VirtualBox,
            "lrpepyh  vr" | "prl hyperv" => Self::Parallels,
            "ACRNACRNACRN" => Self::Acrn,
            other => Self::Unknown(other.to_string()),
        })
    }

    /// Its name in reports.
    pub fn name(&self) -> String {
        match self {
            Self::Kvm => "KVM".into(),
            Self::HyperV => "Microsoft Hyper-V".into(),
            Self::VMware => "VMware".into(),
            Self::Xen => "Xen".into(),
            Self::Tcg => "QEMU TCG (no acceleration)".into(),
            Self::Bhyve => "bhyve".into(),
            Self::VirtualBox => "VirtualBox".into(),
            Self::Parallels => "Parallels".into(),
            Self::Acrn => "ACRN".into(),
            Self::Unknown(s) => format!("unknown hypervisor {s:?}"),
        }
    }
}

/// What the evidence says about where fairground runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VirtFacts {
    /// The hypervisor, if any.
    pub hypervisor: Option<Hypervisor>,
    /// The platform DMI names (`QEMU Standard PC`, `Amazon EC2 m5.large`).
    pub platform: Option<String>,
    /// Set for a KVM guest without DMI: a Firecracker-style microVM, with its
    /// virtio transport.
    pub microvm: Option<String>,
    /// The container engine, if fairground itself runs in a container.
    pub container: Option<String>,
    /// Each piece of evidence, in words.
    pub evidence: Vec<String>,
}

impl VirtFacts {
    /// One line for the report header.
    pub fn describe(&self) -> String {
        let vm = match (&self.hypervisor, &self.microvm) {
            (None, _) => "bare metal".to_string(),
            (Some(_), Some(m)) => format!("VM: {m}"),
            (Some(h), None) => match &self.platform {
                Some(p) => format!("VM: {} ({p})", h.name()),
                None => format!("VM: {}", h.name()),
            },
        };
        match &self.container {
            Some(c) => format!("container ({c}) on {vm}"),
            None => vm,
        }
    }
}

const DMI_FILES: [&str; 6] = [
    "sys_vendor",
    "product_name",
    "product_version",
    "bios_vendor",
    "board_vendor",
    "chassis_vendor",
];

/// DMI strings → (hypervisor they imply, platform name).
fn from_dmi(dmi: &[String]) -> Option<(Option<Hypervisor>, String)> {
    let all = dmi.join(" ");
    let has = |s: &str| all.to_ascii_lowercase().contains(&s.to_ascii_lowercase());
    let product = dmi.get(1).cloned().unwrap_or_default();
    if has("innotek") || has("VirtualBox") {
        Some((Some(Hypervisor::VirtualBox), "VirtualBox".into()))
    } else if has("QEMU") {
        // KVM or TCG: CPUID decides.
        Some((None, format!("QEMU {product}").trim().to_string()))
    } else if has("Amazon EC2") {
        Some((None, format!("Amazon EC2 {product}").trim().to_string()))
    } else if has("Google") {
        Some((Some(Hypervisor::Kvm), "Google Compute Engine".into()))
    } else if has("Microsoft Corporation") && has("Virtual Machine") {
        Some((Some(Hypervisor::HyperV), "Hyper-V Virtual Machine".into()))
    } else if has("VMware") {
        Some((Some(Hypervisor::VMware), "VMware".into()))
    } else if has("Xen") {
        Some((Some(Hypervisor::Xen), "Xen HVM domU".into()))
    } else if has("BHYVE") {
        Some((Some(Hypervisor::Bhyve), "bhyve".into()))
    } else if has("Parallels") {
        Some((Some(Hypervisor::Parallels), "Parallels".into()))
    } else if has("OpenStack") {
        Some((Some(Hypervisor::Kvm), "OpenStack Nova".into()))
    } else {
        None
    }
}

/// Weigh the evidence under `env.root` and in the CPUID probe.
pub fn detect(env: &Env<'_>) -> VirtFacts {
    let mut f = VirtFacts::default();
    let cpuid = env.probes.cpuid.as_ref();
    let from_cpuid = cpuid.filter(|c| c.hypervisor_bit).map(|c| {
        (
            c.signature.clone(),
            Hypervisor::from_signature(&c.signature),
        )
    });
    match &from_cpuid {
        Some((sig, _)) => f
            .evidence
            .push(format!("CPUID hypervisor bit set, signature {sig:?}")),
        None if cpuid.is_some() => f.evidence.push("CPUID hypervisor bit clear".into()),
        None => f.evidence.push("CPUID not available".into()),
    }
    let cpuid_hv = from_cpuid.and_then(|(_, h)| h);

    let dmi: Vec<String> = DMI_FILES
        .iter()
        .map(|n| {
            env.read(&format!("/sys/class/dmi/id/{n}"))
                .unwrap_or_default()
        })
        .collect();
    let dmi_present = dmi.iter().any(|s| !s.is_empty());
    let dmi_says = from_dmi(&dmi);
    if dmi_present {
        f.evidence.push(format!("DMI: {} / {}", dmi[0], dmi[1]));
    } else {
        f.evidence.push("no DMI (/sys/class/dmi/id absent)".into());
    }
    let xen_sysfs = env.read("/sys/hypervisor/type").filter(|t| t == "xen");
    if xen_sysfs.is_some() {
        f.evidence.push("/sys/hypervisor/type = xen".into());
    }

    let (dmi_hv, platform) = match dmi_says {
        Some((h, p)) => (h, Some(p)),
        None => (None, None),
    };
    let qemu_dmi = platform.as_deref().is_some_and(|p| p.starts_with("QEMU"));
    f.platform = platform;
    f.hypervisor = match (cpuid_hv, dmi_hv) {
        // VirtualBox presents a KVM or Hyper-V paravirt interface: DMI names it.
        (Some(Hypervisor::Kvm | Hypervisor::HyperV), Some(Hypervisor::VirtualBox)) => {
            Some(Hypervisor::VirtualBox)
        }
        // QEMU machine with no accelerator signature: instructions are emulated.
        (None | Some(Hypervisor::Unknown(_)), None) if qemu_dmi => Some(Hypervisor::Tcg),
        (Some(h), _) => Some(h),
        (None, Some(h)) => Some(h),
        (None, None) if xen_sysfs.is_some() => Some(Hypervisor::Xen),
        (None, None) if cpuid.is_some_and(|c| c.hypervisor_bit) => {
            Some(Hypervisor::Unknown(String::new()))
        }
        (None, None) => None,
    };

    if f.hypervisor == Some(Hypervisor::Kvm) && !dmi_present {
        let transport = virtio_transport(env);
        f.microvm = Some(match transport {
            Some(t) => format!("Firecracker-style microVM (KVM, no DMI, virtio on {t})"),
            None => "Firecracker-style microVM (KVM, no DMI)".to_string(),
        });
    }

    let (container, notes) = detect_container(env);
    f.container = container;
    f.evidence.extend(notes);
    f
}

/// `virtio_mmio` or `PCI`, from where the virtio devices sit in sysfs.
fn virtio_transport(env: &Env<'_>) -> Option<&'static str> {
    let dir = env.path("/sys/bus/virtio/devices");
    let mut any_pci = false;
    for e in fs::read_dir(dir).ok()?.flatten() {
        let Ok(real) = fs::canonicalize(e.path()) else {
            continue;
        };
        let s = real.to_string_lossy();
        if s.contains("virtio-mmio") || s.contains("virtio_mmio") {
            return Some("virtio_mmio");
        }
        any_pci |= s.contains("/pci");
    }
    any_pci.then_some("PCI")
}

/// The container engine fairground runs in, if any, and notes on the markers.
fn detect_container(env: &Env<'_>) -> (Option<String>, Vec<String>) {
    let mut notes = Vec::new();
    if env.path("/run/.containerenv").exists() {
        notes.push("/run/.containerenv present".into());
        return (Some("podman".into()), notes);
    }
    match fs::read(env.path("/proc/1/environ")) {
        Ok(bytes) => {
            for var in bytes.split(|b| *b == 0) {
                if let Some(v) = var.strip_prefix(b"container=") {
                    let v = String::from_utf8_lossy(v).to_string();
                    notes.push(format!("PID 1 environment has container={v}"));
                    return (Some(v), notes);
                }
            }
        }
        Err(e) => notes.push(format!("/proc/1/environ unreadable ({e})")),
    }
    if let Some(cg) = env.read("/proc/1/cgroup") {
        for marker in ["docker", "kubepods", "libpod", "lxc", "containerd"] {
            if cg.lines().any(|l| l.contains(marker)) {
                notes.push(format!("/proc/1/cgroup names {marker}"));
                return (Some(marker.into()), notes);
            }
        }
    }
    if env.path("/.dockerenv").exists() {
        // A root filesystem exported from a Docker image keeps /.dockerenv
        // (this workplace's microVM does), so it counts only when the root
        // is also a union filesystem as Docker mounts it.
        let root_fs = env
            .read("/proc/self/mountinfo")
            .and_then(|m| root_fs_type(&m));
        let union = root_fs
            .as_deref()
            .is_some_and(|t| matches!(t, "overlay" | "fuse-overlayfs" | "aufs"));
        if union {
            notes.push(format!(
                "/.dockerenv present and / is {}",
                root_fs.unwrap_or_default()
            ));
            return (Some("docker".into()), notes);
        }
        notes.push(format!(
            "/.dockerenv present but / is {} (not a container's union fs): ignored",
            root_fs.unwrap_or_else(|| "of unknown type".into())
        ));
    }
    (None, notes)
}

/// The filesystem type of the mount at `/` in a mountinfo text.
pub fn root_fs_type(mountinfo: &str) -> Option<String> {
    mountinfo.lines().rev().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mount_point = left.split_whitespace().nth(4)?;
        (mount_point == "/").then(|| right.split_whitespace().next().map(str::to_string))?
    })
}

/// `virt.kind`: bare metal, container or VM, and which hypervisor.
pub struct VirtKind;

const KIND_WHY: &str =
    "A VM without hardware acceleration (QEMU TCG) emulates every instruction and \
    VirtualBox on a Hyper-V host runs on its slow path (130k vs 530k req/s for the same binary); \
    inside a container, cores, memory and load are the container's view, not the host's";

impl Check for VirtKind {
    fn id(&self) -> &'static str {
        "virt.kind"
    }
    fn family(&self) -> Family {
        Family::Virtualization
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let f = detect(env);
        let measured = format!("{} [{}]", f.describe(), f.evidence.join("; "));
        let threshold = "bare metal or a hardware-accelerated hypervisor; not TCG; no container";
        let (verdict, remedy) = match (&f.hypervisor, &f.container) {
            (Some(Hypervisor::Tcg), _) => (
                CheckStatus::Fail,
                "run on a host with KVM (QEMU -accel kvm) or bare metal; TCG figures are meaningless",
            ),
            (_, Some(_)) => (
                CheckStatus::Warn,
                "run fairground on the host (or VM) itself, not inside a container",
            ),
            (Some(Hypervisor::VirtualBox), _) => (
                CheckStatus::Warn,
                "prefer KVM; on Windows turn off Hyper-V/VBS so VirtualBox is not on its slow path, \
                 and check virt.cost",
            ),
            (Some(Hypervisor::Unknown(_)), _) => (
                CheckStatus::Warn,
                "find out which hypervisor this is and compare only with runs on the same one",
            ),
            _ => (
                CheckStatus::Pass,
                "compare results only with runs on the same kind of host",
            ),
        };
        Judgement::new(verdict, measured, threshold, KIND_WHY, remedy)
    }
}

/// CPUID exit cost under which the hypervisor is on its fast path. Source:
/// this workplace's Firecracker microVM on KVM measured about 1.3 µs per
/// CPUID exit (getppid about 280 ns); bare metal costs tens of ns; 2.5 µs
/// leaves room for a busy host without admitting a slow path.
pub const CPUID_EXIT_PASS_NS: f64 = 2_500.0;
/// CPUID exit cost above which the hypervisor is on a slow path (several
/// times the healthy KVM figure, as in the Hical write-up's 4x loss).
pub const CPUID_EXIT_FAIL_NS: f64 = 10_000.0;

/// `virt.cost`: measured cost of a VM exit (CPUID) and of a syscall.
pub struct VirtCost;

impl Check for VirtCost {
    fn id(&self) -> &'static str {
        "virt.cost"
    }
    fn family(&self) -> Family {
        Family::Virtualization
    }
    fn evaluate(&self, env: &Env<'_>) -> Judgement {
        let why = "every CPUID traps to the hypervisor in a VM, so its cost is the VM-exit round \
                   trip; a hypervisor on its slow path (nested, or VirtualBox on Hyper-V) costs \
                   several times more and makes every figure several times too low";
        let threshold = format!(
            "pass < {:.1} µs, warn ≤ {:.1} µs, fail above (healthy KVM ≈ 1.3 µs, bare metal tens of ns)",
            CPUID_EXIT_PASS_NS / 1000.0,
            CPUID_EXIT_FAIL_NS / 1000.0
        );
        let Some(c) = &env.probes.exit_cost else {
            return Judgement::new(
                CheckStatus::Warn,
                "not measured (no CPUID on this architecture)",
                threshold,
                why,
                "measure VM-exit cost another way on this architecture before trusting figures",
            );
        };
        let measured = format!(
            "CPUID {:.2} µs per exit, getppid {:.2} µs per syscall (median of {} bursts of {})",
            c.cpuid_ns / 1000.0,
            c.syscall_ns / 1000.0,
            c.bursts,
            c.per_burst
        );
        let verdict = if c.cpuid_ns < CPUID_EXIT_PASS_NS {
            CheckStatus::Pass
        } else if c.cpuid_ns <= CPUID_EXIT_FAIL_NS {
            CheckStatus::Warn
        } else {
            CheckStatus::Fail
        };
        Judgement::new(
            verdict,
            measured,
            threshold,
            why,
            "put the hypervisor on its fast path: hardware virtualization on, no nesting, \
             on Windows hosts Hyper-V/VBS off for VirtualBox, or use bare metal",
        )
    }
}

/// The checks of this family.
pub fn checks() -> Vec<Box<dyn Check>> {
    vec![Box::new(VirtKind), Box::new(VirtCost)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_signatures_name_their_hypervisor() {
        assert_eq!(
            Hypervisor::from_signature("KVMKVMKVM"),
            Some(Hypervisor::Kvm)
        );
        assert_eq!(
            Hypervisor::from_signature("TCGTCGTCGTCG"),
            Some(Hypervisor::Tcg)
        );
        assert_eq!(
            Hypervisor::from_signature("Microsoft Hv"),
            Some(Hypervisor::HyperV)
        );
        assert_eq!(
            Hypervisor::from_signature("bhyve bhyve "),
            Some(Hypervisor::Bhyve)
        );
        assert_eq!(Hypervisor::from_signature(""), None);
        assert_eq!(
            Hypervisor::from_signature("NewHyperVis"),
            Some(Hypervisor::Unknown("NewHyperVis".into()))
        );
    }

    #[test]
    fn root_fs_type_is_read_from_the_mount_at_slash() {
        let mi = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
                  31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n";
        assert_eq!(root_fs_type(mi).as_deref(), Some("ext4"));
        let docker = "500 400 0:50 / / rw - overlay overlay rw,lowerdir=/x\n";
        assert_eq!(root_fs_type(docker).as_deref(), Some("overlay"));
    }
}

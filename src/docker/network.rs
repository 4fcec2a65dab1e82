//! The per-run network: one internal bridge (no egress), with an explicit
//! subnet that collides with no existing Docker network, labelled with the
//! run id and removed by the run's cleanup.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::query_parameters::ListNetworksOptions;
use bollard::Docker;

use super::error::{ApiContext, DockerError};
use super::{RunId, LABEL_RUN};

/// The /16 run networks are carved from, one /24 each. Outside Docker's
/// default address pools (172.17-31.x, 192.168.x), so it rarely collides.
pub const SUBNET_BASE: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 0);

/// A created run network.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetworkInfo {
    /// Network name (`<run>-net`).
    pub name: String,
    /// Network id.
    pub id: String,
    /// Its subnet, CIDR.
    pub subnet: String,
    /// Whether the daemon says it is internal (no route out).
    pub internal: bool,
}

/// Parse `a.b.c.d/len` into (network, prefix length).
pub fn parse_cidr(cidr: &str) -> Option<(u32, u8)> {
    let (ip, len) = cidr.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((u32::from(ip) & mask, len))
}

fn overlaps(a: (u32, u8), b: (u32, u8)) -> bool {
    let len = a.1.min(b.1);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a.0 & mask == b.0 & mask
}

/// The first /24 of [`SUBNET_BASE`]'s /16 that overlaps none of `taken`.
pub fn free_subnet(taken: &[String]) -> Option<String> {
    let taken: Vec<(u32, u8)> = taken.iter().filter_map(|c| parse_cidr(c)).collect();
    let base = u32::from(SUBNET_BASE);
    (0..256u32)
        .map(|i| (base | (i << 8), 24u8))
        .find(|cand| !taken.iter().any(|t| overlaps(*cand, *t)))
        .map(|(net, len)| format!("{}/{len}", Ipv4Addr::from(net)))
}

async fn taken_subnets(docker: &Docker) -> Result<Vec<String>, DockerError> {
    let nets = docker
        .list_networks(None::<ListNetworksOptions>)
        .await
        .doing(|| "listing networks to pick a free subnet".into())?;
    Ok(nets
        .into_iter()
        .flat_map(|n| n.ipam.and_then(|i| i.config).unwrap_or_default())
        .filter_map(|c| c.subnet)
        .collect())
}

/// Create the run's internal network. Retries with the next free subnet
/// when another process took the chosen one in between.
pub async fn create(docker: &Docker, run: &RunId) -> Result<NetworkInfo, DockerError> {
    let name = format!("{}-net", run.name_prefix());
    let mut taken = taken_subnets(docker).await?;
    for _attempt in 0..8 {
        let subnet = free_subnet(&taken).ok_or_else(|| DockerError::NoSubnet {
            network: name.clone(),
            range: format!("{SUBNET_BASE}/16"),
        })?;
        let req = NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            internal: Some(true),
            attachable: Some(false),
            ipam: Some(Ipam {
                driver: Some("default".into()),
                config: Some(vec![IpamConfig {
                    subnet: Some(subnet.clone()),
                    ..Default::default()
                }]),
                options: None,
            }),
            labels: Some(HashMap::from([(LABEL_RUN.to_string(), run.0.clone())])),
            ..Default::default()
        };
        match docker.create_network(req).await {
            Ok(resp) => {
                let id = resp.id;
                let inspect = docker
                    .inspect_network(
                        &id,
                        None::<bollard::query_parameters::InspectNetworkOptions>,
                    )
                    .await
                    .doing(|| format!("inspecting network {name}"))?;
                return Ok(NetworkInfo {
                    name,
                    id,
                    subnet,
                    internal: inspect.internal.unwrap_or(false),
                });
            }
            Err(e) if e.to_string().to_lowercase().contains("overlap") => {
                taken.push(subnet);
                continue;
            }
            Err(source) => {
                return Err(DockerError::Api {
                    doing: format!("creating network {name} ({subnet})"),
                    source,
                })
            }
        }
    }
    Err(DockerError::NoSubnet {
        network: name,
        range: format!("{SUBNET_BASE}/16"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_first_subnet_that_overlaps_nothing() {
        assert_eq!(free_subnet(&[]).unwrap(), "10.213.0.0/24");
        let taken = vec!["10.213.0.0/24".to_string(), "172.17.0.0/16".to_string()];
        assert_eq!(free_subnet(&taken).unwrap(), "10.213.1.0/24");
        // A wider network covering the whole /16 leaves nothing.
        assert_eq!(free_subnet(&["10.0.0.0/8".to_string()]), None);
        // A narrower one inside a /24 still blocks that /24.
        assert_eq!(
            free_subnet(&["10.213.0.128/25".to_string()]).unwrap(),
            "10.213.1.0/24"
        );
    }
}

// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Building worlds: topologies, transports, and the standard parameters.
//!
//! The defaults model a small RoCE fabric: 100 Gb/s NICs and links, 4 KiB MTU,
//! about 8 us of base round trip, switch queues of 1 MiB with ECN marking above
//! 100 KiB.

use metaroce_proto::Config;

use crate::clock::{Time, US};
use crate::endpoint::Endpoint;
use crate::gbn::{GbnConfig, GbnHost};
use crate::host::{HostConfig, MetaHost};
use crate::link::LinkConfig;
use crate::network::{Network, NetworkConfig};
use crate::world::World;

/// 100 Gb/s.
pub const GBPS_100: u64 = 100_000_000_000;

/// Which transport every host runs.
#[derive(Clone, Copy, Debug)]
pub enum Transport {
    /// The MetaRoCE core.
    Meta(HostConfig),
    /// The RoCEv2 go-back-N baseline.
    Gbn(GbnConfig),
}

impl Transport {
    /// MetaRoCE with the core's default configuration over `paths` paths.
    pub fn meta(paths: u8) -> Self {
        let mut c = Config::new(1);
        c.paths = paths;
        Transport::Meta(HostConfig::new(c))
    }

    /// The baseline with its defaults.
    pub fn gbn() -> Self {
        Transport::Gbn(GbnConfig::new())
    }

    /// Short name for tables.
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Meta(_) => "MetaRoCE",
            Transport::Gbn(g) if g.dcqcn.is_some() => "GBN+DCQCN",
            Transport::Gbn(_) => "GBN",
        }
    }
}

/// A core link with the standard queue: 1 MiB, ECN above 100 KiB.
pub fn fabric_link(rate_bps: u64, delay_ns: Time) -> LinkConfig {
    let mut l = LinkConfig::new(rate_bps, delay_ns);
    l.queue_bytes = 1 << 20;
    l.ecn_threshold_bytes = 100 << 10;
    l
}

/// Two hosts joined by `paths` equal-cost 100 Gb/s paths of 3 us each way
/// (plus 0.5 us of downlink): base RTT about 8 us plus serialization.
pub fn pair_network(paths: usize) -> NetworkConfig {
    NetworkConfig {
        hosts: 2,
        nic_rate_bps: GBPS_100,
        paths: vec![fabric_link(GBPS_100, 3 * US); paths],
        downlink: fabric_link(GBPS_100, US / 2),
        ecmp_seed: 0xEC3F,
    }
}

/// `senders + 1` hosts; host 0 receives. Core paths are fast enough that the
/// receiver's 100 Gb/s downlink is the only bottleneck.
pub fn incast_network(senders: usize, paths: usize) -> NetworkConfig {
    let core_rate = GBPS_100 * (senders as u64).div_ceil(paths as u64).max(1);
    let mut core = fabric_link(core_rate, 3 * US);
    core.queue_bytes = 64 << 20;
    NetworkConfig {
        hosts: senders + 1,
        nic_rate_bps: GBPS_100,
        paths: vec![core; paths],
        downlink: fabric_link(GBPS_100, US / 2),
        ecmp_seed: 0xEC3F,
    }
}

/// A world of `net.hosts` hosts all running `transport`.
pub fn build_world(net: NetworkConfig, transport: Transport, seed: u64) -> World {
    let n = net.hosts;
    let hosts: Vec<Box<dyn Endpoint>> = (0..n)
        .map(|i| -> Box<dyn Endpoint> {
            match transport {
                Transport::Meta(cfg) => Box::new(MetaHost::new(i, cfg, seed.wrapping_add(i as u64 * 0x1_0001))),
                Transport::Gbn(cfg) => Box::new(GbnHost::new(i, cfg)),
            }
        })
        .collect();
    World::new(Network::new(net, seed), hosts)
}

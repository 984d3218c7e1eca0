// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The topology: hosts, K equal-cost core paths chosen by an ECMP hash, and one
//! downlink per host.
//!
//! ```text
//!   host NIC ──► core link k (k = ECMP hash of the 5-tuple) ──► downlink of dst ──► host
//! ```
//!
//! Every host reaches every other host over the same K core links; each core
//! link exists once per direction (towards the higher or the lower host id), so
//! acknowledgements do not queue behind data. A host's downlink is shared by
//! everything sent to it: in an incast it is the bottleneck whose queue fills
//! and marks ECN. Rerolling a UDP source port rehashes the 5-tuple and so moves
//! the flow to another core link with probability `(K-1)/K`.

use crate::clock::Time;
use crate::datagram::{Datagram, HostId};
use crate::link::{Link, LinkConfig};
use crate::rng::Rng;

/// Index of a link in [`Network::links`].
pub type LinkId = usize;

/// Topology parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkConfig {
    /// Number of hosts.
    pub hosts: usize,
    /// Host NIC line rate, bits per second (hosts serialize their own output).
    pub nic_rate_bps: u64,
    /// The K equal-cost core paths (used in both directions).
    pub paths: Vec<LinkConfig>,
    /// Last hop from the switch to each host.
    pub downlink: LinkConfig,
    /// ECMP hash seed (a different seed is a different switch hash function).
    pub ecmp_seed: u64,
}

/// A scheduled change of a core path's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathFault {
    /// Core path index.
    pub path: usize,
    /// When the path starts dropping everything (both directions).
    pub down_at: Time,
    /// When it recovers, if ever.
    pub up_at: Option<Time>,
}

/// Links, their state and routing.
pub struct Network {
    /// Configuration.
    pub cfg: NetworkConfig,
    /// All links: `2 * K` core links (path `k`, direction `d` at `2k + d`),
    /// then one downlink per host.
    pub links: Vec<Link>,
}

impl Network {
    /// Builds the links; each gets its own random stream derived from `seed`.
    pub fn new(cfg: NetworkConfig, seed: u64) -> Self {
        let mut links = Vec::new();
        for (k, p) in cfg.paths.iter().enumerate() {
            for d in 0..2u64 {
                links.push(Link::new(*p, Rng::derive(seed, 0x100 + 2 * k as u64 + d)));
            }
        }
        for h in 0..cfg.hosts {
            links.push(Link::new(
                cfg.downlink,
                Rng::derive(seed, 0x10_000 + h as u64),
            ));
        }
        Network { cfg, links }
    }

    /// Number of core paths.
    pub fn paths(&self) -> usize {
        self.cfg.paths.len()
    }

    /// The core path the switch's ECMP hash picks for `d`'s 5-tuple.
    pub fn ecmp_path(&self, d: &Datagram) -> usize {
        self.ecmp_link(d.src, d.dst, d.sport, d.dport)
    }

    /// The core path the switch's ECMP hash picks for a 5-tuple.
    pub fn ecmp_link(&self, src: HostId, dst: HostId, sport: u16, dport: u16) -> usize {
        let k = self.paths().max(1) as u64;
        let key =
            (src as u64) << 48 ^ (dst as u64) << 32 ^ u64::from(sport) << 16 ^ u64::from(dport);
        (Rng::derive(self.cfg.ecmp_seed, key ^ 17 << 56).next_u64() % k) as usize
    }

    /// The links `d` traverses, in order: its core link, then the destination's downlink.
    pub fn route(&self, d: &Datagram) -> [LinkId; 2] {
        let k = self.ecmp_path(d);
        let dir = usize::from(d.src > d.dst);
        [2 * k + dir, 2 * self.paths() + d.dst]
    }

    /// The core link of path `k` in direction `dir` (0: towards the higher host id).
    pub fn core_link(&self, k: usize, dir: usize) -> &Link {
        &self.links[2 * k + dir]
    }

    /// The downlink to host `h`.
    pub fn downlink(&self, h: HostId) -> &Link {
        &self.links[2 * self.paths() + h]
    }

    /// Blackholes (or restores) core path `k` in both directions.
    pub fn set_path_down(&mut self, k: usize, down: bool) {
        for dir in 0..2 {
            if let Some(l) = self.links.get_mut(2 * k + dir) {
                l.blackholed = down;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagram::Ecn;

    #[test]
    fn ecmp_spreads_ports_over_paths() {
        let cfg = NetworkConfig {
            hosts: 2,
            nic_rate_bps: 100_000_000_000,
            paths: vec![LinkConfig::new(100_000_000_000, 1000); 8],
            downlink: LinkConfig::new(100_000_000_000, 100),
            ecmp_seed: 3,
        };
        let net = Network::new(cfg, 1);
        let mut hits = [0u32; 8];
        for port in 0..8000u16 {
            let d = Datagram::new(0, 1, 49152 + port, 4793, Ecn::Ect, Vec::new());
            hits[net.ecmp_path(&d)] += 1;
            assert_eq!(net.route(&d)[1], 16 + 1);
        }
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        let back = Datagram::new(1, 0, 5, 4793, Ecn::Ect, Vec::new());
        assert_eq!(net.route(&back)[0] % 2, 1);
    }
}

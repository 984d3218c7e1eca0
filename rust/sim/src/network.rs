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
//!
//! Or a multiplane leaf-spine fabric ([`Multiplane`], issue 38): `P` independent
//! planes, each a two-tier Clos of leaves and spines; every host has one port per
//! plane on its leaf of that plane.
//!
//! ```text
//!   host ──► its plane-p port (p = hash of the 5-tuple) ──► leaf ──► spine s
//!        (s = the leaf's ECMP hash) ──► destination's leaf ──► host
//! ```
//!
//! A path (UDP source port) thus picks a plane at the host and a spine at the leaf;
//! hosts on one leaf meet at the leaf. A whole plane can fail ([`Network::set_path_down`]
//! takes the plane's index).
//!
//! With pods ([`Multiplane::pods`] above 1) each plane is a three-tier fat tree: the
//! leaves and spines form pods, and spine `s` of every pod joins each of the
//! [`Multiplane::cores`] core switches of core group `s`. Between pods:
//!
//! ```text
//!   host ──► leaf ──► spine s (leaf's hash) ──► core c of group s (spine's hash)
//!        ──► spine s of the destination's pod ──► leaf ──► host
//! ```

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
    /// A multiplane leaf-spine fabric instead of the K core paths and downlinks.
    pub multiplane: Option<Multiplane>,
}

/// A multiplane two-tier Clos: `planes` copies of `leaves` leaf switches each joined
/// to every one of `spines` spine switches; host `h` hangs off leaf
/// `h / hosts_per_leaf` of every plane (`hosts_per_leaf = ceil(hosts / leaves)`).
/// With `pods` above 1, a three-tier fat tree: the leaves split evenly into pods,
/// each pod has its own `spines` spines, and spine `s` of every pod joins the `cores`
/// core switches of group `s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Multiplane {
    /// Independent planes (one NIC port per plane).
    pub planes: usize,
    /// Leaf switches per plane.
    pub leaves: usize,
    /// Spine switches per pod (per plane when there are no pods).
    pub spines: usize,
    /// Pods per plane (0 or 1: a two-tier Clos, no cores).
    pub pods: usize,
    /// Core switches per core group (one group per spine index); unused without pods.
    pub cores: usize,
    /// A host port's link to and from its leaf.
    pub host_link: LinkConfig,
    /// A leaf-spine link, each direction.
    pub fabric_link: LinkConfig,
}

impl Multiplane {
    /// Whether the planes are three-tier fat trees.
    pub fn three_tier(&self) -> bool {
        self.pods > 1
    }

    /// Pods per plane (1 for a two-tier Clos).
    pub fn pod_count(&self) -> usize {
        self.pods.max(1)
    }

    /// The pod of `leaf`.
    pub fn pod_of(&self, leaf: usize) -> usize {
        leaf / self.leaves.div_ceil(self.pod_count()).max(1)
    }
}

/// Most links a datagram crosses: host to leaf, leaf to spine, spine to core, core to
/// spine, spine to leaf, leaf to host.
const MAX_HOPS: usize = 6;

/// The links a datagram crosses, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    links: [LinkId; MAX_HOPS],
    len: u8,
}

impl Route {
    fn new(links: &[LinkId]) -> Self {
        let mut r = Route {
            links: [0; MAX_HOPS],
            len: links.len() as u8,
        };
        r.links[..links.len()].copy_from_slice(links);
        r
    }

    /// Hops.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether it has no hop.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The link of hop `i`.
    pub fn hop(&self, i: usize) -> Option<LinkId> {
        self.links[..self.len()].get(i).copied()
    }
}

/// A link of one plane of a [`Multiplane`] fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaneLink {
    /// From host `h` to its leaf.
    HostUp(HostId),
    /// From its leaf to host `h`.
    HostDown(HostId),
    /// From a leaf to a spine.
    LeafUp {
        /// The leaf.
        leaf: usize,
        /// The spine.
        spine: usize,
    },
    /// From a spine to a leaf of its pod.
    SpineDown {
        /// The spine (its index in the pod).
        spine: usize,
        /// The leaf.
        leaf: usize,
    },
    /// From spine `spine` of pod `pod` to core `core` of its group.
    SpineUp {
        /// The pod.
        pod: usize,
        /// The spine (its index in the pod, which is also its core group).
        spine: usize,
        /// The core switch in the group.
        core: usize,
    },
    /// From core `core` of group `spine` to that spine of pod `pod`.
    CoreDown {
        /// The core switch in the group.
        core: usize,
        /// The pod.
        pod: usize,
        /// The spine (group).
        spine: usize,
    },
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
        if let Some(m) = cfg.multiplane {
            for p in 0..m.planes {
                let plane = |i: u64| Rng::derive(seed, 0x1_000_000 * (p as u64 + 1) + i);
                // Host up, host down, leaf to spine, spine to leaf: see `plane_link`.
                for i in 0..2 * cfg.hosts as u64 {
                    links.push(Link::new(m.host_link, plane(i)));
                }
                for i in 0..2 * (m.leaves * m.spines) as u64 {
                    links.push(Link::new(m.fabric_link, plane(0x10_0000 + i)));
                }
                for i in 0..2 * Self::core_links_per_direction(&m) as u64 {
                    links.push(Link::new(m.fabric_link, plane(0x20_0000 + i)));
                }
            }
        }
        Network { cfg, links }
    }

    /// Spine-core links of one plane, each direction (0 without pods).
    fn core_links_per_direction(m: &Multiplane) -> usize {
        if m.three_tier() {
            m.pods * m.spines * m.cores
        } else {
            0
        }
    }

    /// Links of one plane: `2 * hosts` host links, `2 * leaves * spines` leaf-spine
    /// links, then the spine-core links.
    fn plane_links(&self, m: &Multiplane) -> usize {
        2 * self.cfg.hosts + 2 * m.leaves * m.spines + 2 * Self::core_links_per_direction(m)
    }

    /// The first link of plane `p`.
    fn plane_base(&self, m: &Multiplane, p: usize) -> LinkId {
        2 * self.paths() + self.cfg.hosts + p * self.plane_links(m)
    }

    /// The link of plane `p` of the given kind.
    pub fn plane_link(&self, p: usize, link: PlaneLink) -> Option<LinkId> {
        let m = self.cfg.multiplane?;
        let base = self.plane_base(&m, p);
        let h = self.cfg.hosts;
        Some(match link {
            PlaneLink::HostUp(host) => base + host,
            PlaneLink::HostDown(host) => base + h + host,
            PlaneLink::LeafUp { leaf, spine } => base + 2 * h + leaf * m.spines + spine,
            PlaneLink::SpineDown { spine, leaf } => {
                base + 2 * h + m.leaves * m.spines + spine * m.leaves + leaf
            }
            PlaneLink::SpineUp { pod, spine, core } => {
                base + 2 * h + 2 * m.leaves * m.spines + (pod * m.spines + spine) * m.cores + core
            }
            PlaneLink::CoreDown { core, pod, spine } => {
                base + 2 * h
                    + 2 * m.leaves * m.spines
                    + Self::core_links_per_direction(&m)
                    + (pod * m.spines + spine) * m.cores
                    + core
            }
        })
    }

    /// The leaf host `h` hangs off (in every plane).
    pub fn leaf_of(&self, h: HostId) -> usize {
        self.cfg
            .multiplane
            .map_or(0, |m| h / self.cfg.hosts.div_ceil(m.leaves.max(1)).max(1))
    }

    /// A hash of the 5-tuple, salted per decision (plane, spine, core path).
    fn hash(&self, src: HostId, dst: HostId, sport: u16, dport: u16, salt: u64) -> u64 {
        let key =
            (src as u64) << 48 ^ (dst as u64) << 32 ^ u64::from(sport) << 16 ^ u64::from(dport);
        Rng::derive(self.cfg.ecmp_seed, key ^ salt << 56).next_u64()
    }

    /// The plane and spine of a 5-tuple in a multiplane fabric.
    pub fn plane_and_spine(
        &self,
        src: HostId,
        dst: HostId,
        sport: u16,
        dport: u16,
    ) -> (usize, usize) {
        let m = self.cfg.multiplane.expect("a multiplane fabric");
        (
            (self.hash(src, dst, sport, dport, 29) % m.planes.max(1) as u64) as usize,
            (self.hash(src, dst, sport, dport, 31) % m.spines.max(1) as u64) as usize,
        )
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
        (self.hash(src, dst, sport, dport, 17) % k) as usize
    }

    /// The links `d` traverses, in order: its core link, then the destination's
    /// downlink; in a multiplane fabric, its plane's host, leaf, spine and (between
    /// the pods of a three-tier plane) core links.
    pub fn route(&self, d: &Datagram) -> Route {
        if let Some(m) = self.cfg.multiplane {
            let (p, spine) = self.plane_and_spine(d.src, d.dst, d.sport, d.dport);
            let (ls, ld) = (self.leaf_of(d.src), self.leaf_of(d.dst));
            let link = |l| self.plane_link(p, l).unwrap_or(0);
            let up = link(PlaneLink::HostUp(d.src));
            let down = link(PlaneLink::HostDown(d.dst));
            if ls == ld {
                return Route::new(&[up, down]);
            }
            let (ps, pd) = (m.pod_of(ls), m.pod_of(ld));
            if ps == pd {
                return Route::new(&[
                    up,
                    link(PlaneLink::LeafUp { leaf: ls, spine }),
                    link(PlaneLink::SpineDown { spine, leaf: ld }),
                    down,
                ]);
            }
            let core =
                (self.hash(d.src, d.dst, d.sport, d.dport, 37) % m.cores.max(1) as u64) as usize;
            return Route::new(&[
                up,
                link(PlaneLink::LeafUp { leaf: ls, spine }),
                link(PlaneLink::SpineUp {
                    pod: ps,
                    spine,
                    core,
                }),
                link(PlaneLink::CoreDown {
                    core,
                    pod: pd,
                    spine,
                }),
                link(PlaneLink::SpineDown { spine, leaf: ld }),
                down,
            ]);
        }
        let k = self.ecmp_path(d);
        let dir = usize::from(d.src > d.dst);
        Route::new(&[2 * k + dir, 2 * self.paths() + d.dst])
    }

    /// The core link of path `k` in direction `dir` (0: towards the higher host id).
    pub fn core_link(&self, k: usize, dir: usize) -> &Link {
        &self.links[2 * k + dir]
    }

    /// The downlink to host `h`.
    pub fn downlink(&self, h: HostId) -> &Link {
        &self.links[2 * self.paths() + h]
    }

    /// Blackholes (or restores) core path `k` in both directions; in a multiplane
    /// fabric, every link of plane `k`.
    pub fn set_path_down(&mut self, k: usize, down: bool) {
        if let Some(m) = self.cfg.multiplane {
            if k < m.planes {
                let (base, n) = (self.plane_base(&m, k), self.plane_links(&m));
                for l in &mut self.links[base..base + n] {
                    l.blackholed = down;
                }
            }
            return;
        }
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
            multiplane: None,
        };
        let net = Network::new(cfg, 1);
        let mut hits = [0u32; 8];
        for port in 0..8000u16 {
            let d = Datagram::new(0, 1, 49152 + port, 4793, Ecn::Ect, Vec::new());
            hits[net.ecmp_path(&d)] += 1;
            assert_eq!(net.route(&d).hop(1), Some(16 + 1));
        }
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
        let back = Datagram::new(1, 0, 5, 4793, Ecn::Ect, Vec::new());
        assert_eq!(net.route(&back).hop(0).map(|l| l % 2), Some(1));
    }

    /// Three tiers: 32 hosts, 2 pods of 2 leaves with 8 hosts each, 8 spines per pod,
    /// 2 cores per group. Hosts of one leaf meet at the leaf, of one pod at a spine,
    /// and the rest cross a core; every core link is reachable and used both ways.
    #[test]
    fn three_tier_routes_cross_cores_only_between_pods() {
        let link = LinkConfig::new(100_000_000_000, 1000);
        let m = Multiplane {
            planes: 2,
            leaves: 4,
            spines: 8,
            pods: 2,
            cores: 2,
            host_link: link,
            fabric_link: link,
        };
        let cfg = NetworkConfig {
            hosts: 32,
            nic_rate_bps: 200_000_000_000,
            paths: Vec::new(),
            downlink: link,
            ecmp_seed: 5,
            multiplane: Some(m),
        };
        let net = Network::new(cfg, 1);
        let hops = |src, dst| {
            let d = Datagram::new(src, dst, 49152, 4793, Ecn::Ect, Vec::new());
            net.route(&d).len()
        };
        assert_eq!(
            (hops(0, 7), hops(0, 8), hops(0, 16), hops(31, 0)),
            (2, 4, 6, 6)
        );
        let mut used = std::collections::BTreeSet::new();
        for port in 0..4000u16 {
            for (s, d) in [(0, 16), (16, 0)] {
                let r = net.route(&Datagram::new(
                    s,
                    d,
                    49152 + port,
                    4793,
                    Ecn::Ect,
                    Vec::new(),
                ));
                used.extend((2..4).filter_map(|i| r.hop(i)));
            }
        }
        // Per plane, 2 pods x 8 spines x 2 cores = 32 links up and 32 down, all used
        // by the two directions of travel.
        assert_eq!(used.len(), 2 * 64);
        let (lo, hi) = (
            net.plane_link(
                0,
                PlaneLink::SpineUp {
                    pod: 0,
                    spine: 0,
                    core: 0,
                },
            ),
            net.plane_link(
                1,
                PlaneLink::CoreDown {
                    core: 1,
                    pod: 1,
                    spine: 7,
                },
            ),
        );
        assert!(lo
            .zip(hi)
            .is_some_and(|(a, b)| used.first() == Some(&a) && used.last() == Some(&b)));
        assert_eq!(hi.map(|l| l + 1), Some(net.links.len()));
    }
}

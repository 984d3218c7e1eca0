// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A deterministic discrete-event network simulator for the MetaRoCE core.
//!
//! Hosts drive [`metaroce_proto::Connection`]s (or the RoCEv2 go-back-N
//! baseline in [`gbn`]) over a network of K equal-cost paths chosen by an ECMP
//! hash of the UDP source port, each path with its own delay, rate, FIFO queue
//! with ECN marking, and seeded faults (loss, jitter, duplication, bit flips,
//! blackholes). Everything is a function of the configuration and one seed.
//!
//! Layout, one concept per file: [`clock`] (virtual time, event queue),
//! [`rng`], [`datagram`], [`link`] (queue, serializer, faults), [`network`]
//! (topology, ECMP), [`memory`] (byte-vector regions), [`workload`] (flows and
//! correctness checks), [`endpoint`] (what a transport offers the world),
//! [`host`] (the MetaRoCE host), [`gbn`] and [`dcqcn`] (the baseline),
//! [`world`] (event loop and bounded drive), [`scenario`] (report scenarios and
//! their metrics) and [`report`] (table and plot).

#![forbid(unsafe_code)]

pub mod clock;
pub mod cluster;
pub mod datagram;
pub mod dcqcn;
pub mod endpoint;
pub mod gbn;
pub mod host;
pub mod link;
pub mod memory;
pub mod network;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod workload;
pub mod world;

// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! What the simulator asks of a host's transport, MetaRoCE or the baseline.
//!
//! The world calls these in a fixed pattern (quinn's test `Pair` is the model):
//! deliver every datagram with [`Endpoint::on_datagram`], fire timers with
//! [`Endpoint::on_timeout`] once [`Endpoint::poll_timeout`] has passed, and pull
//! datagrams with [`Endpoint::poll_transmit`] whenever the host NIC is idle.

use crate::clock::Time;
use crate::datagram::{Datagram, HostId};
use crate::memory::HostMemory;
use crate::workload::{FlowLog, FlowSpec};

/// Transport counters of one host, summed over its connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Data packets sent (including retransmissions).
    pub data_packets: u64,
    /// Retransmitted data packets.
    pub retransmits: u64,
    /// Payload bytes sent (including retransmissions).
    pub payload_bytes: u64,
    /// Acknowledgement packets sent.
    pub acks: u64,
    /// Negative acknowledgements sent.
    pub naks: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// ... of them spurious (undone).
    pub spurious_timeouts: u64,
    /// Paths retired (source port re-rolled).
    pub paths_retired: u64,
    /// Datagrams dropped by the UDP checksum.
    pub checksum_drops: u64,
    /// Datagrams the transport dropped (malformed, out of window, ...).
    pub rx_dropped: u64,
    /// Payload bytes received out of order and discarded (go-back-N).
    pub ooo_discarded_bytes: u64,
}

/// A host's transport, as the simulator drives it.
pub trait Endpoint {
    /// Sets up this host's end of flow `flow` (if it is its source or
    /// destination) and posts its first work requests.
    fn add_flow(&mut self, flow: usize, spec: &FlowSpec, now: Time);
    /// A datagram arrived.
    fn on_datagram(&mut self, now: Time, d: Datagram);
    /// Timers due at or before `now` fire.
    fn on_timeout(&mut self, now: Time);
    /// The next datagram to put on the wire, if any may go now.
    fn poll_transmit(&mut self, now: Time) -> Option<Datagram>;
    /// When [`on_timeout`](Self::on_timeout) should be called next.
    fn poll_timeout(&self) -> Option<Time>;
    /// Lets the source of flow `flow`, which waits for another ([`FlowSpec::after`]),
    /// post its first `msgs` messages.
    fn release(&mut self, flow: usize, msgs: usize, now: Time);
    /// This host's record of flow `flow`.
    fn flow_log(&self, flow: usize) -> Option<&FlowLog>;
    /// This host's memory (for byte comparisons).
    fn memory(&self) -> &HostMemory;
    /// Transport counters.
    fn stats(&self) -> EndpointStats;
    /// Completions reported so far (progress for livelock detection).
    fn completions(&self) -> u64;
    /// The UDP source ports this host's paths to `peer` use now (none if the
    /// transport has no paths).
    fn path_ports(&self, _peer: HostId) -> Vec<u16> {
        Vec::new()
    }
    /// Payload bytes placed into this host's memory from packets of `peer`
    /// (first copies only).
    fn placed_from(&self, peer: HostId) -> u64;
}

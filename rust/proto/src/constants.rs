// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Protocol constants and implementation limits of MetaRoCE draft v0.
//!
//! Protocol constants are fixed by the wire format; both peers MUST agree on
//! them. Implementation limits bound this crate's memory; a peer MAY choose
//! other limits without changing the wire format.
//!
//= Documentation/metaroce/spec.rst#constants

/// UDP destination port of MetaRoCE (RoCEv2 uses 4791; the two coexist on one host).
pub const UDP_PORT: u16 = 4793;

/// Value of the version field for MetaRoCE draft v0 ("D0").
pub const VERSION_DRAFT0: u8 = 0xD0;

/// Length of the common header in bytes.
pub const COMMON_HEADER_LEN: usize = 16;

/// Length of the stream header carried by every data packet, in bytes.
pub const STREAM_HEADER_LEN: usize = 16;

/// Largest header (common + extension) of any data packet, in bytes.
pub const MAX_DATA_HEADER_LEN: usize = COMMON_HEADER_LEN + 44;

/// Bits in a per-path selective acknowledgement bitmap.
pub const SACK_BITS: usize = 256;

/// Largest reorder threshold a path adapts to after spurious loss declarations
/// (a quarter of the SACK window).
pub const MAX_REORDER_THRESHOLD: u32 = (SACK_BITS / 4) as u32;

/// Bytes in a per-path selective acknowledgement bitmap.
pub const SACK_BYTES: usize = SACK_BITS / 8;

/// Length of one per-path block in an ACK packet, in bytes.
pub const ACK_BLOCK_LEN: usize = 8 + SACK_BYTES;

/// Length of the fixed part of the ACK extension header, in bytes.
pub const ACK_HEADER_LEN: usize = 8;

/// Length of the NAK extension header, in bytes.
pub const NAK_HEADER_LEN: usize = 20;

/// Length of the control extension header, in bytes.
pub const CONTROL_HEADER_LEN: usize = 8;

/// Largest number of path blocks one ACK packet carries.
pub const MAX_ACK_BLOCKS: usize = MAX_PATHS;

/// Largest ACK packet (all headers, no payload), in bytes.
pub const MAX_ACK_LEN: usize = COMMON_HEADER_LEN + ACK_HEADER_LEN + MAX_ACK_BLOCKS * ACK_BLOCK_LEN;

/// Smallest buffer `poll_transmit` accepts: any header this crate emits fits.
pub const MIN_TRANSMIT_BUF: usize = MAX_ACK_LEN;

/// A receiver accepts a data PSN at most this far beyond its cumulative PSN.
///
/// A conforming sender keeps at most [`SACK_BITS`] packets in flight per path
/// beyond its oldest unresolved PSN, and the receiver's cumulative PSN lags that
/// by at most [`SACK_BITS`], so anything further is forged or corrupt.
pub const PSN_ACCEPT_WINDOW: u32 = 2 * SACK_BITS as u32;

/// A receiver accepts a data PSN at most this far before its cumulative PSN
/// (a late packet whose data may still be new); older PSNs are stale.
pub const PSN_BEHIND_WINDOW: u32 = SACK_BITS as u32;

/// Segments in the per-QP reassembly window (stream segment numbers).
///
/// A sender MUST NOT send a segment whose SSN is this far or more beyond its
/// oldest unacknowledged SSN on that stream.
pub const REASM_WINDOW: usize = 1024;

/// Largest message length in bytes (as RDMA: 2 GiB).
pub const MAX_MSG_LEN: u32 = 1 << 31;

/// Length of an atomic operand and of an atomic operation's memory target, in bytes.
pub const ATOMIC_LEN: u32 = 8;

/// Units of the rate hint field: 1 Mbit/s = 125 000 bytes per second.
pub const RATE_HINT_UNIT_BPS: u64 = 125_000;

/// Nanoseconds per unit of the ACK delay field (1 microsecond).
pub const ACK_DELAY_UNIT_NS: u64 = 1_000;

/// Nanoseconds per unit of the RNR timer field of a NAK (10 microseconds).
pub const RNR_TIMER_UNIT_NS: u64 = 10_000;

// Implementation limits.

/// Most paths (UDP source ports) per connection.
pub const MAX_PATHS: usize = 16;

/// Most queue pairs carried by one connection.
pub const MAX_QPS: usize = 16;

/// Most outstanding send work requests per QP (a power of two).
pub const MAX_SEND_WR: usize = 64;

/// Most posted receive work requests per QP (a power of two).
pub const MAX_RECV_WR: usize = 64;

/// Most incoming messages per QP tracked by the responder (a power of two).
pub const MAX_RX_MSGS: usize = 64;

/// How far ahead of its oldest incomplete receive a QP may bind receives from its shared
/// receive queue, in RSNs ([MR-SRQ-3]): what one peer can hold of an SRQ per QP with
/// messages it never completes.
pub const SRQ_CLAIM_WINDOW: usize = 16;

/// Most READ/atomic responses per QP held by the responder until acknowledged.
pub const MAX_RESPONSES: usize = 32;

/// Most pending NAKs per connection.
pub const MAX_PENDING_NAKS: usize = 8;

/// Most pending non-completion events per connection.
pub const MAX_PENDING_EVENTS: usize = 16;

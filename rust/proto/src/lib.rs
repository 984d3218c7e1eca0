// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! MetaRoCE protocol core: an RDMA transport for lossy Ethernet, without I/O.
//!
//! This crate holds the whole protocol and nothing else: the wire codec,
//! per-path sequencing with 256-bit SACK, selective retransmission, multipath
//! spraying over UDP source ports, out-of-order placement with in-order
//! completion, congestion control and rate hints. It performs no I/O, reads no
//! clock, draws no randomness of its own, never allocates, never uses `unsafe`
//! and never panics on any input. It builds three ways: into the kernel module,
//! as a host crate for tests, fuzzing and benchmarks, and inside the simulator.
//!
//! # Driving a [`Connection`]
//!
//! A driver (or simulator) owns one [`Connection`] per peer pair and serializes
//! all calls on it. It feeds in what happens and carries out what comes back:
//!
//! - [`Connection::open_qp`] binds a QP (at RTR); [`Connection::post_send`] and
//!   [`Connection::post_recv`] queue work requests.
//! - [`Connection::handle_datagram`] takes every received datagram with the
//!   current time and the IP ECN-CE mark. Payload placement goes through the
//!   [`Memory`] trait the caller passes in: the driver validates rkey, bounds
//!   and access before any byte lands, and the core NAKs what it refuses.
//! - [`Connection::poll_transmit`] writes the next packet's headers into a
//!   caller buffer and returns a [`Transmit`] saying which source port to use
//!   and which payload bytes (a [`Payload`] descriptor) to append.
//! - [`Connection::poll_timeout`] says when to call
//!   [`Connection::handle_timeout`] next.
//! - [`Connection::poll_event`] returns completions (requester and responder,
//!   exactly once, in order per QP) and other [`Event`]s.
//!
//! See `API.md` next to this crate for a worked loop.
//!
//= Documentation/metaroce/spec.rst#overview

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// pin_init's `init!` (a macro_rules macro in the crates.io copy) recurses once per field.
#![recursion_limit = "512"]

pub mod cc;
mod conn;
pub mod constants;
mod event;
pub mod limit;
mod memory;
pub mod path;
mod psn;
mod qp_id;
mod rng;
mod sack;
mod timer;
pub mod wire;
mod wr;

pub use conn::{
    rto_from_local_ack_timeout, stream_start, Config, ConnState, Connection, PostError, QpArray,
    QpSlot, QpStore, RxDrop, Stats, DEFAULT_PACING_GAIN, MAX_PACING_GAIN, MAX_PATH_BURST,
};
pub use conn::{Payload, Transmit};
pub use event::{Completion, Event, ResponderError, WcOpcode, WcStatus};
pub use memory::{AtomicOp, Dest, MemError, Memory, RxPayload};
pub use psn::Psn;
pub use qp_id::QpId;
pub use timer::Instant;
pub use wr::{Opcode, WorkRequest};

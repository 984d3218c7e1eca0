// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A userspace MetaRoCE endpoint: the protocol core driven over UDP sockets.
//!
//! One [`Endpoint`] owns one connection to one peer (a metaroce kernel device or
//! another endpoint) and one QP on it. The caller registers memory regions,
//! posts work requests and calls [`Endpoint::wait`] for their completions; the
//! endpoint feeds the core received datagrams and timer expiries, gathers
//! payloads for the packets it returns and places received payloads in
//! [`LocalMemory`] after checking rkey, access and bounds.
//!
//! See `Documentation/metaroce/userspace.rst`.

mod endpoint;
pub mod exchange;
mod lossy;
mod memory;
mod path_ports;
mod requester;
mod responder;
mod transport;

pub use endpoint::{Endpoint, EndpointConfig, WaitError};
pub use lossy::{Impairment, LossySocket};
pub use memory::{Access, LocalMemory};
pub use metaroce_proto::{Completion, Opcode, WcOpcode, WcStatus, WorkRequest};
pub use path_ports::PathPorts;
pub use requester::{pattern, CheckError, Requester};
pub use responder::{serve, RegionSpec};
pub use transport::{enable_ecn, Received, Transport};

// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The boundary to application memory: the core never touches it.
//!
//! The driver implements [`Memory`] and passes it to
//! [`Connection::handle_datagram`](crate::Connection::handle_datagram). Every
//! call MUST validate before it writes (rkey, protection domain, access flags,
//! bounds; receive buffer length); a refusal becomes a NAK or an error status.
//!
//= Documentation/metaroce/spec.rst#placement

use crate::qp_id::QpId;

/// Where a payload lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dest {
    /// Responder memory region (RDMA WRITE): `rkey` and the payload's own address.
    Remote {
        /// Remote key from the packet.
        rkey: u32,
        /// Address of the first payload byte (message base + offset).
        va: u64,
    },
    /// Responder receive WQE (SEND): the posted receive `wr_id` at `offset`.
    Recv {
        /// The receive work request.
        wr_id: u64,
        /// Byte offset in its scatter list.
        offset: u32,
    },
    /// Requester local buffer of a READ or atomic work request `wr_id` at `offset`.
    Local {
        /// The send work request.
        wr_id: u64,
        /// Byte offset in its scatter list.
        offset: u32,
    },
}

/// Why memory refused an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemError {
    /// Invalid rkey, out of bounds, or access not permitted.
    Access,
    /// The request is invalid (e.g. misaligned atomic).
    Invalid,
    /// The operation failed for another reason.
    Operation,
}

/// Atomic operation on 8 bytes of responder memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Swap in `swap` if the value equals `compare`.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Add `add` (wrapping).
    FetchAdd {
        /// Addend.
        add: u64,
    },
}

/// A received payload: `head`, in the buffer the core parsed, followed by `tail`
/// bytes the driver holds elsewhere (the paged part of a socket buffer), which the
/// core counts but never reads. See
/// [`Connection::handle_datagram_split`](crate::Connection::handle_datagram_split).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxPayload<'a> {
    /// The bytes in the parsed buffer, after the headers.
    pub head: &'a [u8],
    /// The number of bytes that follow `head` outside it.
    pub tail: u32,
}

impl RxPayload<'_> {
    /// The payload length in bytes.
    pub fn len(&self) -> u64 {
        (self.head.len() as u64).saturating_add(u64::from(self.tail))
    }

    /// Returns `true` for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail == 0
    }
}

/// Application memory as the core sees it.
pub trait Memory {
    /// Validates and copies `data` to `dest` for local QP `qp`.
    fn place(&mut self, qp: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError>;

    /// Validates and copies a received payload, `data.head` then its tail, to `dest`
    /// for local QP `qp`. The whole length MUST be validated before any byte is
    /// written. The default places payloads without a tail through
    /// [`place`](Self::place) and refuses the others: a driver that never splits
    /// datagrams need not implement it.
    fn place_split(&mut self, qp: QpId, dest: Dest, data: RxPayload<'_>) -> Result<(), MemError> {
        if data.tail == 0 {
            self.place(qp, dest, data.head)
        } else {
            Err(MemError::Operation)
        }
    }

    /// Validates that `len` bytes at `rkey`/`va` may be read remotely (READ request).
    /// The bytes are gathered later, when the driver transmits the response.
    fn check_read(&mut self, qp: QpId, rkey: u32, va: u64, len: u32) -> Result<(), MemError>;

    /// Validates and executes an atomic at `rkey`/`va`; returns the original value.
    fn atomic(&mut self, qp: QpId, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError>;

    /// Takes a receive for `qp` from the shared receive queue it is attached to (verbs
    /// SRQ), as `(wr_id, len)` like [`Connection::post_recv`](crate::Connection::post_recv).
    /// Called only when a message needs a receive the QP does not hold; `None` (the
    /// default, for QPs without one) leaves the message to RNR.
    //= Documentation/metaroce/spec.rst#shared-receive-queues
    fn take_shared_recv(&mut self, _qp: QpId) -> Option<(u64, u32)> {
        None
    }
}

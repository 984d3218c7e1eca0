// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Send work requests as the core needs them (no scatter lists: the driver
//! keeps those and gathers payload bytes when it transmits).

/// Send work request opcode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// SEND.
    #[default]
    Send,
    /// SEND with immediate data.
    SendImm,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate data (consumes a receive WQE at the responder).
    WriteImm,
    /// RDMA READ.
    Read,
    /// Atomic compare-and-swap (8 bytes).
    CompareSwap,
    /// Atomic fetch-and-add (8 bytes).
    FetchAdd,
}

impl Opcode {
    /// Whether the message consumes a receive WQE at the responder.
    pub fn consumes_recv(self) -> bool {
        matches!(self, Opcode::Send | Opcode::SendImm | Opcode::WriteImm)
    }

    /// Whether the requester waits for a response stream (READ, atomics).
    pub fn has_response(self) -> bool {
        matches!(self, Opcode::Read | Opcode::CompareSwap | Opcode::FetchAdd)
    }

    /// Whether this is an atomic.
    pub fn is_atomic(self) -> bool {
        matches!(self, Opcode::CompareSwap | Opcode::FetchAdd)
    }
}

/// A send work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WorkRequest {
    /// Caller's id, returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub opcode: Opcode,
    /// Message length in bytes (atomics: 8).
    pub len: u32,
    /// Remote virtual address (WRITE, READ, atomics).
    pub remote_addr: u64,
    /// Remote key (WRITE, READ, atomics).
    pub rkey: u32,
    /// Immediate data (SEND_IMM, WRITE_IMM).
    pub imm: u32,
    /// Compare value (CMP_SWAP) or addend (FETCH_ADD).
    pub compare_add: u64,
    /// Swap value (CMP_SWAP).
    pub swap: u64,
    /// Solicited event flag.
    pub solicited: bool,
    /// Ask for the acknowledgement of the message's last packet at once
    /// (`ACK_REQ`): the application waits for this completion (a signaled
    /// work request). Otherwise the receiver may delay it ([MR-SACK-10]).
    pub ack_req: bool,
}

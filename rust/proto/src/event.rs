// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! What the core reports to its driver: completions and connection events.

use crate::qp_id::QpId;

/// Work completion status (the verbs `ibv_wc_status` values a driver maps to).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// `IBV_WC_SUCCESS`.
    #[default]
    Success,
    /// `IBV_WC_LOC_LEN_ERR`: a received SEND exceeded the receive buffer.
    LocLenErr,
    /// `IBV_WC_LOC_PROT_ERR`: the driver refused to place a READ or atomic
    /// response into the work request's local buffer.
    LocProtErr,
    /// `IBV_WC_REM_ACCESS_ERR`: the responder refused the rkey, bounds or access.
    RemAccessErr,
    /// `IBV_WC_REM_INV_REQ_ERR`: the responder found the request invalid.
    RemInvReqErr,
    /// `IBV_WC_REM_OP_ERR`: the responder failed to execute the request.
    RemOpErr,
    /// `IBV_WC_RETRY_EXC_ERR`: retransmission retries exhausted.
    RetryExcErr,
    /// `IBV_WC_RNR_RETRY_EXC_ERR`: receiver-not-ready retries exhausted.
    RnrRetryExcErr,
    /// `IBV_WC_WR_FLUSH_ERR`: flushed because the QP is in the error state.
    WrFlushErr,
}

/// Work completion opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// SEND (with or without immediate) completed at the requester.
    Send,
    /// RDMA WRITE (with or without immediate) completed at the requester.
    RdmaWrite,
    /// RDMA READ completed at the requester.
    RdmaRead,
    /// Atomic compare-and-swap completed at the requester.
    CompSwap,
    /// Atomic fetch-and-add completed at the requester.
    FetchAdd,
    /// A receive WQE consumed by a SEND.
    Recv,
    /// A receive WQE consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
}

/// One work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// Local QP.
    pub qp: QpId,
    /// The work request's id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode.
    pub opcode: WcOpcode,
    /// Bytes transferred (receives: message length).
    pub byte_len: u32,
    /// Immediate data (receives of SEND_IMM / WRITE_IMM).
    pub imm: Option<u32>,
    /// The message asked for a solicited event (receives; verbs `IBV_SEND_SOLICITED`),
    /// which wakes a CQ armed with `solicited_only`.
    pub solicited: bool,
}

/// Why a responder refused a request ([`Event::ResponderError`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResponderError {
    /// The request named memory it may not access: a bad rkey, an address outside
    /// the region or a missing right (verbs `IBV_EVENT_QP_ACCESS_ERR`).
    Access,
    /// The request itself was invalid, such as a misaligned atomic (verbs
    /// `IBV_EVENT_QP_REQ_ERR`).
    InvalidRequest,
}

/// An event for the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A work request completed. Requester completions of one QP come in post
    /// order, responder (receive) completions in the requester's message order.
    Completion(Completion),
    /// A QP entered the error state; its remaining work requests are flushed.
    QpError {
        /// The QP.
        qp: QpId,
        /// The error that caused it.
        status: WcStatus,
    },
    /// The QP's responder refused a request of the peer (verbs reports this as an
    /// affiliated asynchronous error; no local completion carries it).
    ResponderError {
        /// The QP.
        qp: QpId,
        /// What was wrong with the request.
        error: ResponderError,
    },
    /// The first request of the peer reached the QP's responder since the QP was
    /// opened (verbs raises `IBV_EVENT_COMM_EST` for it on a QP still in RTR). It
    /// comes before any completion the request causes on that QP.
    FirstRequest {
        /// The QP.
        qp: QpId,
    },
    /// A path was retired after repeated timeouts and its source port re-rolled.
    PathRetired {
        /// Path id.
        path: u8,
        /// New UDP source port.
        new_port: u16,
    },
    /// The peer closed the connection.
    Closed {
        /// Reason code from the peer (0 = normal).
        reason: u32,
    },
}

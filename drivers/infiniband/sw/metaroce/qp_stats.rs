// SPDX-License-Identifier: GPL-2.0

//! Per-QP counters (`rdma statistic qp show`, see `rdma::counter`): relaxed atomics in
//! the QP, counted where the connection's run attributes a packet or a completion to
//! it (under the connection's lock it already holds: no lock of their own), read by
//! ib_core's counters.

use kernel::sync::atomic::{Atomic, Relaxed};
use rdma::cq::WcStatus;

/// How many there are: the last entries of the port's counters
/// (`crate::net::HW_COUNTERS`), named `qp_*`, in the order of [`QpCounters::read`].
pub(crate) const COUNT: usize = 8;

/// The counters of one QP, from its creation.
pub(crate) struct QpCounters {
    /// Data packets sent with this QP's payload (its requests' data, its READ
    /// responses), retransmissions included.
    tx_data: Atomic<u64>,
    /// Their payload bytes.
    tx_bytes: Atomic<u64>,
    /// Of those packets, retransmissions.
    tx_retransmits: Atomic<u64>,
    /// Received data segments placed in this QP's memory (first copies).
    rx_data: Atomic<u64>,
    /// Their payload bytes.
    rx_bytes: Atomic<u64>,
    /// Send completions with a remote error (access, invalid request, operation).
    rem_errors: Atomic<u64>,
    /// Send completions whose retries ran out (transport or RNR).
    retry_exceeded: Atomic<u64>,
    /// Requests of the peer refused (access or invalid request).
    req_refused: Atomic<u64>,
}

impl QpCounters {
    pub(crate) const fn new() -> Self {
        Self {
            tx_data: Atomic::new(0),
            tx_bytes: Atomic::new(0),
            tx_retransmits: Atomic::new(0),
            rx_data: Atomic::new(0),
            rx_bytes: Atomic::new(0),
            rem_errors: Atomic::new(0),
            retry_exceeded: Atomic::new(0),
            req_refused: Atomic::new(0),
        }
    }

    /// A data packet with `bytes` of this QP's payload went out.
    pub(crate) fn count_tx(&self, bytes: u32, retransmit: bool) {
        self.tx_data.fetch_add(1, Relaxed);
        self.tx_bytes.fetch_add(u64::from(bytes), Relaxed);
        if retransmit {
            self.tx_retransmits.fetch_add(1, Relaxed);
        }
    }

    /// `bytes` of a received segment were placed.
    pub(crate) fn count_rx(&self, bytes: usize) {
        self.rx_data.fetch_add(1, Relaxed);
        self.rx_bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// A send work request completed with `status`.
    pub(crate) fn count_send_status(&self, status: WcStatus) {
        match status {
            WcStatus::RemAccessErr | WcStatus::RemInvReqErr | WcStatus::RemOpErr => {
                self.rem_errors.fetch_add(1, Relaxed);
            }
            WcStatus::RetryExcErr | WcStatus::RnrRetryExcErr => {
                self.retry_exceeded.fetch_add(1, Relaxed);
            }
            _ => {}
        }
    }

    /// A request of the peer was refused.
    pub(crate) fn count_refused(&self) {
        self.req_refused.fetch_add(1, Relaxed);
    }

    /// The values, in the order of the `qp_*` port counters.
    pub(crate) fn read(&self, values: &mut [u64]) {
        let all = [
            &self.tx_data,
            &self.tx_bytes,
            &self.tx_retransmits,
            &self.rx_data,
            &self.rx_bytes,
            &self.rem_errors,
            &self.retry_exceeded,
            &self.req_refused,
        ];
        for (v, a) in values.iter_mut().zip(all) {
            *v = a.load(Relaxed);
        }
    }
}

// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Storage for a connection's QPs, supplied by its owner.
//!
//! The core allocates nothing, yet a connection may carry any number of QPs
//! (verbs users open thousands between two hosts). The owner chooses the
//! storage: a fixed array ([`QpArray`], the default, [`MAX_QPS`] slots) or
//! anything implementing [`QpStore`], such as a kernel vector of boxed
//! [`QpSlot`]s that grows when every slot is taken (see
//! [`Connection::open_qp_psn`](super::Connection::open_qp_psn)). A slot's index
//! is the [`QpId`](super::QpId) of the QP bound to it: slots never move or go
//! away while the connection lives.
//!
//= Documentation/metaroce/spec.rst#streams

use super::config::Config;
use super::qp::Qp;
use crate::constants::MAX_QPS;
use crate::path::inflight::Sent;
use crate::timer::Instant;
use pin_init::{init, Init};

/// One QP's state in a connection (about 15 KiB): opaque to the owner, built in
/// place with [`QpSlot::init`].
#[derive(Clone, Debug)]
pub struct QpSlot {
    pub(crate) qp: Qp,
}

impl QpSlot {
    /// In-place initializer of a free slot.
    pub fn init() -> impl Init<Self> {
        init!(QpSlot { qp <- Qp::init() })
    }

    /// Whether a QP is bound to this slot.
    pub fn is_bound(&self) -> bool {
        self.qp.state == super::qp::QpState::Active
    }
}

/// Where a connection keeps its QPs. Slot `i` holds the QP with id `i`; the
/// number of slots may grow between calls, never shrink.
pub trait QpStore {
    /// The number of slots.
    fn len(&self) -> usize;

    /// Whether there are no slots.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slot `i`.
    fn get(&self, i: usize) -> Option<&QpSlot>;

    /// Slot `i`, mutably.
    fn get_mut(&mut self, i: usize) -> Option<&mut QpSlot>;
}

/// The default store: [`MAX_QPS`] slots inside the connection.
pub type QpArray = [QpSlot; MAX_QPS];

impl<const N: usize> QpStore for [QpSlot; N] {
    fn len(&self) -> usize {
        N
    }

    fn get(&self, i: usize) -> Option<&QpSlot> {
        <[QpSlot]>::get(self, i)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut QpSlot> {
        <[QpSlot]>::get_mut(self, i)
    }
}

/// The core's view of a store: the QPs themselves.
pub(crate) trait QpStoreExt: QpStore {
    fn qp(&self, i: usize) -> Option<&Qp> {
        self.get(i).map(|s| &s.qp)
    }

    fn qp_mut(&mut self, i: usize) -> Option<&mut Qp> {
        self.get_mut(i).map(|s| &mut s.qp)
    }

    /// A path lost `sent`: if it was a request packet, its QP counts the loss
    /// detection `detection` ([`Qp::request_lost`]).
    fn request_lost(&mut self, sent: &Sent, detection: u32, now: Instant, cfg: &Config) {
        if sent.chunk.resp {
            return;
        }
        if let Some(q) = self.qp_mut(usize::from(sent.chunk.qp)) {
            q.request_lost(detection, now, cfg);
        }
    }
}

impl<S: QpStore + ?Sized> QpStoreExt for S {}

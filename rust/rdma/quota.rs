// SPDX-License-Identifier: GPL-2.0

//! Counts of live objects against the limits a device reports (`max_pd`, `max_cq`,
//! `max_qp`, `max_srq`, `max_mr`, `max_ah` of `ibv_query_device`).
//!
//! A create verb takes one unit before it builds the object and keeps it if it
//! succeeds; the destroy verb gives it back. A create beyond the limit fails with
//! `ENOMEM`, as verbs providers report running out of resources.

use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// The live objects of one kind.
pub struct Quota(Atomic<u32>);

impl Quota {
    /// No object yet.
    pub const fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// Counts one more object unless `max` are live already (`ENOMEM`). The unit is
    /// given back when the returned [`Taken`] is dropped, unless it is kept.
    pub fn take(&self, max: u32) -> Result<Taken<'_>> {
        if self.0.fetch_add(1, Relaxed) >= max {
            self.put();
            return Err(ENOMEM);
        }
        Ok(Taken(self))
    }

    /// Counts one object less: a counted object was destroyed.
    pub fn put(&self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Default for Quota {
    fn default() -> Self {
        Self::new()
    }
}

/// One unit of a [`Quota`] for an object being created.
pub struct Taken<'a>(&'a Quota);

impl Taken<'_> {
    /// The object exists: it stays counted until its destroy verb calls [`Quota::put`].
    pub fn keep(self) {
        core::mem::forget(self);
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.0.put();
    }
}

/// The counts of a device's objects, by kind.
pub struct Quotas {
    /// Protection domains.
    pub pd: Quota,
    /// Completion queues.
    pub cq: Quota,
    /// Queue pairs (QP1 included).
    pub qp: Quota,
    /// Shared receive queues.
    pub srq: Quota,
    /// User memory regions.
    pub mr: Quota,
    /// Address handles.
    pub ah: Quota,
}

impl Quotas {
    pub(crate) const fn new() -> Self {
        Self {
            pd: Quota::new(),
            cq: Quota::new(),
            qp: Quota::new(),
            srq: Quota::new(),
            mr: Quota::new(),
            ah: Quota::new(),
        }
    }
}

// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! [`QpId`], the handle by which the connection, its events and the memory it places
//! into name a local QP. It imports nothing, so that every file can use it.

/// A local QP's handle within its connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpId(pub u16);

impl QpId {
    /// Slot index.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Per-device tables of objects by number (MR keys, QP numbers, AH numbers).
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h).

use crate::sync::SpinLockBh;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    xarray::{AllocKind, XArray},
};

/// An XArray of shared objects with allocation of free numbers in `[min, max]`.
///
/// Every access to the XArray is made under `bh`, with softirqs disabled, so the
/// transport may look objects up from the packet receive softirq ([`Table::with`]).
#[pin_data]
pub struct Table<V: Send + Sync + 'static> {
    #[pin]
    bh: SpinLockBh<()>,
    #[pin]
    xa: XArray<Arc<V>>,
    /// Serialises allocations (a store may drop the XArray lock to allocate); holds
    /// the next number to try.
    #[pin]
    next: Mutex<u32>,
    min: u32,
    max: u32,
}

impl<V: Send + Sync + 'static> Table<V> {
    /// Creates an empty table handing out numbers in `[min, max]`.
    pub fn new(min: u32, max: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            bh <- crate::new_spinlock_bh!((), "metaroce_table"),
            xa <- XArray::new(AllocKind::Alloc),
            next <- new_mutex!(min),
            min,
            max,
        })
    }

    /// Stores the object `make(n)` under a free number `n`, returns `n`; `ENOSPC` when
    /// every number is taken.
    pub fn insert_with(&self, make: impl FnOnce(u32) -> Result<Arc<V>>) -> Result<u32> {
        let mut next = self.next.lock();
        let span = self.max - self.min + 1;
        let mut n = (*next).clamp(self.min, self.max);
        let mut free = None;
        {
            let _bh = self.bh.lock();
            let guard = self.xa.lock();
            for _ in 0..span {
                if guard.get(n as usize).is_none() {
                    free = Some(n);
                    break;
                }
                n = if n == self.max { self.min } else { n + 1 };
            }
        }
        let n = free.ok_or(ENOSPC)?;
        let obj = make(n)?;
        {
            let _bh = self.bh.lock();
            self.xa.lock().store(n as usize, obj, GFP_ATOMIC)?;
        }
        *next = if n == self.max { self.min } else { n + 1 };
        Ok(n)
    }

    /// Returns the object stored under `n`.
    pub fn get(&self, n: u32) -> Option<Arc<V>> {
        let _bh = self.bh.lock();
        // Bound to a local: the XArray guard must drop before `_bh`.
        let v = self.xa.lock().get(n as usize).map(Arc::from);
        v
    }

    /// Calls `f` with the object stored under `n` while it stays in the table: no
    /// reference escapes, so the last one is never dropped in the caller's context
    /// (softirq allowed). `f` must not sleep.
    pub fn with<R>(&self, n: u32, f: impl FnOnce(Option<&V>) -> R) -> R {
        let _bh = self.bh.lock();
        let guard = self.xa.lock();
        let r = f(guard.get(n as usize).as_deref());
        drop(guard);
        r
    }

    /// Removes and returns the object stored under `n`.
    pub fn remove(&self, n: u32) -> Option<Arc<V>> {
        let _bh = self.bh.lock();
        let v = self.xa.lock().remove(n as usize);
        v
    }
}

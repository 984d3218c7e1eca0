// SPDX-License-Identifier: GPL-2.0

//! Per-device tables of objects by number (MR keys, QP numbers, AH numbers).
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h).

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    xarray::{AllocKind, XArray},
};

/// An XArray of shared objects with allocation of free numbers in `[min, max]`.
///
/// Lookups take the XArray's spinlock (process or softirq-free contexts: the lock is
/// not taken with bottom halves disabled).
#[pin_data]
pub struct Table<V: Send + Sync + 'static> {
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
        self.xa.lock().store(n as usize, obj, GFP_KERNEL)?;
        *next = if n == self.max { self.min } else { n + 1 };
        Ok(n)
    }

    /// Returns the object stored under `n`.
    pub fn get(&self, n: u32) -> Option<Arc<V>> {
        self.xa.lock().get(n as usize).map(Arc::from)
    }

    /// Removes and returns the object stored under `n`.
    pub fn remove(&self, n: u32) -> Option<Arc<V>> {
        self.xa.lock().remove(n as usize)
    }
}

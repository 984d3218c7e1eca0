// SPDX-License-Identifier: GPL-2.0

//! Per-device tables of objects by number (MR keys, QP numbers, AH numbers).
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h).

use kernel::{
    new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex, SpinLockIrq,
    },
    xarray::{AllocKind, XArray},
};

/// An XArray of shared objects with allocation of free numbers in `[min, max]`.
///
/// Every access to the XArray is made under `bh`, with interrupts disabled, so the
/// transport may look objects up from the packet receive softirq ([`Table::with`]) and
/// kernel consumers may create AHs with interrupts off (the CM does, under
/// `spin_lock_irqsave`; a bottom-half lock would re-enable softirqs there).
#[pin_data]
pub struct Table<V: Send + Sync + 'static> {
    #[pin]
    bh: SpinLockIrq<()>,
    #[pin]
    xa: XArray<Arc<V>>,
    /// Serialises allocations (a store may drop the XArray lock to allocate); holds
    /// the next number to try.
    #[pin]
    next: Mutex<u32>,
    /// Where `insert_atomic` looks first.
    cursor: Atomic<u32>,
    min: u32,
    max: u32,
}

impl<V: Send + Sync + 'static> Table<V> {
    /// Creates an empty table handing out numbers in `[min, max]`.
    pub fn new(min: u32, max: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            bh <- new_spinlock_irq!((), "metaroce_table"),
            xa <- XArray::new(AllocKind::Alloc),
            next <- new_mutex!(min),
            cursor: Atomic::new(min),
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

    /// Like [`Table::insert_with`], from any context: `make` runs under the table's
    /// spinlocks and must not sleep (allocate with `GFP_ATOMIC`). A table filled this
    /// way must not also be filled with [`Table::insert_with`].
    pub fn insert_atomic(&self, make: impl FnOnce(u32) -> Result<Arc<V>>) -> Result<u32> {
        let _bh = self.bh.lock();
        let mut guard = self.xa.lock();
        let start = self.cursor.load(Relaxed).clamp(self.min, self.max);
        let mut n = start;
        loop {
            if guard.get(n as usize).is_none() {
                break;
            }
            n = if n == self.max { self.min } else { n + 1 };
            if n == start {
                return Err(ENOSPC);
            }
        }
        let obj = make(n)?;
        guard.store(n as usize, obj, GFP_ATOMIC)?;
        drop(guard);
        self.cursor
            .store(if n == self.max { self.min } else { n + 1 }, Relaxed);
        Ok(n)
    }

    /// Stores `obj` at the fixed number `n` (which may lie outside the allocation
    /// range, like QP 1); `EBUSY` if taken.
    pub fn insert_at(&self, n: u32, obj: Arc<V>) -> Result {
        let _next = self.next.lock();
        let _bh = self.bh.lock();
        let mut guard = self.xa.lock();
        if guard.get(n as usize).is_some() {
            return Err(EBUSY);
        }
        guard.store(n as usize, obj, GFP_ATOMIC)?;
        drop(guard);
        Ok(())
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

// SPDX-License-Identifier: GPL-2.0

//! The rings that the Soft-RoCE (rxe) user ABI shares with user space.
//!
//! C header: [`include/uapi/rdma/rdma_user_rxe.h`](srctree/include/uapi/rdma/rdma_user_rxe.h)
//! (`struct rxe_queue_buf`); the kernel side of rdma_rxe is `rxe_queue.[ch]`, the user
//! side rdma-core's `providers/rxe/rxe_queue.h`.
//!
//! A ring is one [`UserBuffer`]: a 384-byte header (`log2_elem_size` and `index_mask`
//! for user space at offset 0, the producer index at byte 128, the consumer index at
//! byte 256) followed by a power of two of slots, each a power of two of at least a
//! cache line. One slot is always left free, so a ring of `2^n` slots holds `2^n - 1`
//! elements. Each index is written by one side only; the other side's index is read
//! with acquire semantics, our own is published with release semantics, and every
//! index read from user space is masked before use. The header copies of the sizes
//! are for user space only: the kernel uses its own.

use crate::{
    bindings,
    mmap::{MmapInfo, UserBuffer},
};
use core::ptr;
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Atomic, Release},
};

const PRODUCER_OFFSET: usize = 128;
const CONSUMER_OFFSET: usize = 256;
const DATA_OFFSET: usize = 384;
/// Slots are at least a cache line (x86-64: 64 bytes), as rdma_rxe makes them.
const MIN_SLOT: usize = 64;

/// Which side produces.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    /// The kernel produces, user space consumes (completion queues).
    ToClient,
    /// User space produces, the kernel consumes (send, receive and shared receive queues).
    FromClient,
}

/// One shared ring.
///
/// # Invariants
///
/// `buf` is at least `DATA_OFFSET + ((mask + 1) << log2_slot)` bytes; `mask + 1` is a
/// power of two; `index <= mask` is the kernel's own index (producer for
/// [`Direction::ToClient`], consumer for [`Direction::FromClient`]).
pub struct Queue {
    buf: UserBuffer,
    log2_slot: u32,
    mask: u32,
    elem_size: usize,
    dir: Direction,
    index: u32,
}

impl Queue {
    /// Creates a ring for at least `num_elem` elements of `elem_size` bytes, mappable in
    /// `uctx`, like `rxe_queue_init`. Returns the ring; [`Queue::capacity`] is the
    /// number of elements it really holds.
    ///
    /// # Safety
    ///
    /// `uctx` is a live user context for the duration of the call.
    pub(crate) unsafe fn new(
        uctx: *mut bindings::ib_ucontext,
        num_elem: u32,
        elem_size: usize,
        dir: Direction,
    ) -> Result<Self> {
        let slot = elem_size
            .max(MIN_SLOT)
            .checked_next_power_of_two()
            .ok_or(EINVAL)?;
        let slots = num_elem
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(EINVAL)?;
        let size = (slots as usize)
            .checked_mul(slot)
            .and_then(|s| s.checked_add(DATA_OFFSET))
            .filter(|s| *s <= u32::MAX as usize)
            .ok_or(EINVAL)?;
        // SAFETY: Per the function's contract.
        let buf = unsafe { UserBuffer::new(uctx, size)? };
        let q = Self {
            buf,
            log2_slot: slot.trailing_zeros(),
            mask: slots - 1,
            elem_size,
            dir,
            index: 0,
        };
        // The header copies for user space; the buffer is not mapped yet, so these plain
        // writes race with nobody.
        // SAFETY: Offsets 0 and 4 are inside the buffer (it is larger than the header)
        // and aligned (vmalloc memory is page aligned).
        unsafe {
            q.buf.as_ptr().cast::<u32>().write(q.log2_slot);
            q.buf.as_ptr().add(4).cast::<u32>().write(q.mask);
        }
        Ok(q)
    }

    /// The mmap information user space needs to map the ring.
    pub fn info(&self) -> MmapInfo {
        self.buf.info()
    }

    /// The number of elements the ring holds (one less than its slots).
    pub fn capacity(&self) -> u32 {
        self.mask
    }

    /// The bytes of a slot: the largest element that fits.
    pub fn slot_size(&self) -> usize {
        1 << self.log2_slot
    }

    /// The element size the ring was created for.
    pub fn elem_size(&self) -> usize {
        self.elem_size
    }

    fn index_at(&self, offset: usize) -> &Atomic<u32> {
        // SAFETY: `offset` is one of the two aligned header words, inside the live buffer;
        // both sides access them only atomically (rdma-core uses C11 atomics).
        unsafe { Atomic::from_ptr(self.buf.as_ptr().add(offset).cast::<u32>()) }
    }

    fn producer(&self) -> u32 {
        match self.dir {
            Direction::ToClient => self.index,
            Direction::FromClient => self.index_at(PRODUCER_OFFSET).load(Acquire) & self.mask,
        }
    }

    fn consumer(&self) -> u32 {
        match self.dir {
            Direction::ToClient => self.index_at(CONSUMER_OFFSET).load(Acquire) & self.mask,
            Direction::FromClient => self.index,
        }
    }

    /// The number of elements produced and not yet consumed.
    pub fn count(&self) -> u32 {
        self.producer().wrapping_sub(self.consumer()) & self.mask
    }

    /// Returns `true` when no element is waiting.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Returns `true` when the producer cannot add an element.
    pub fn is_full(&self) -> bool {
        self.count() == self.mask
    }

    fn slot(&self, index: u32) -> *mut u8 {
        let off = DATA_OFFSET + (((index & self.mask) as usize) << self.log2_slot);
        // SAFETY: `off + slot_size` is inside the buffer (type invariant).
        unsafe { self.buf.as_ptr().add(off) }
    }

    /// Adds `elem` at the producer index and publishes it (kernel-produced rings only).
    ///
    /// Fails with `ENOSPC` when the ring is full, `EINVAL` when `elem` is larger than a
    /// slot or the ring is user-produced.
    pub fn push(&mut self, elem: &[u8]) -> Result {
        if self.dir != Direction::ToClient || elem.len() > self.slot_size() {
            return Err(EINVAL);
        }
        if self.is_full() {
            return Err(ENOSPC);
        }
        // SAFETY: The slot is inside the buffer and `elem` fits in it. User space does not
        // read it before the release store below publishes it.
        unsafe { ptr::copy_nonoverlapping(elem.as_ptr(), self.slot(self.index), elem.len()) };
        let next = (self.index + 1) & self.mask;
        self.index = next;
        self.index_at(PRODUCER_OFFSET).store(next, Release);
        Ok(())
    }

    /// Copies bytes `offset..offset + out.len()` of the element at the consumer index into
    /// `out` (user-produced rings only). Returns `false` when the ring is empty.
    ///
    /// The bytes are a snapshot of memory user space may be writing: parse, never trust.
    pub fn read_head(&self, offset: usize, out: &mut [u8]) -> Result<bool> {
        self.read_at(0, offset, out)
    }

    /// Like [`read_head`](Self::read_head), for the element `ahead` places after the
    /// consumer index. Returns `false` when fewer than `ahead + 1` elements wait.
    pub fn read_at(&self, ahead: u32, offset: usize, out: &mut [u8]) -> Result<bool> {
        if self.dir != Direction::FromClient
            || offset
                .checked_add(out.len())
                .is_none_or(|end| end > self.slot_size())
        {
            return Err(EINVAL);
        }
        if ahead >= self.count() {
            return Ok(false);
        }
        let index = self.index.wrapping_add(ahead);
        // SAFETY: The range is inside the slot (checked above), inside the buffer. User
        // space may write it concurrently; we only copy bytes, which any value may hold.
        unsafe {
            ptr::copy_nonoverlapping(self.slot(index).add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(true)
    }

    /// Reads a `T` at byte `offset` of the element `ahead` places after the consumer
    /// index, in one unaligned load (user-produced rings only); `Ok(None)` when fewer
    /// than `ahead + 1` elements wait. Like [`read_at`](Self::read_at) without the
    /// intermediate copy.
    ///
    /// # Safety
    ///
    /// Every bit pattern of `size_of::<T>()` bytes is a valid `T` (integers, arrays and
    /// unions of them): user space may be writing the bytes.
    pub unsafe fn read_as_at<T>(&self, ahead: u32, offset: usize) -> Result<Option<T>> {
        if self.dir != Direction::FromClient
            || offset
                .checked_add(size_of::<T>())
                .is_none_or(|end| end > self.slot_size())
        {
            return Err(EINVAL);
        }
        if ahead >= self.count() {
            return Ok(None);
        }
        let index = self.index.wrapping_add(ahead);
        // SAFETY: The range is inside the slot (checked above), inside the buffer; any
        // bytes are a valid `T` (the caller's contract), whatever user space writes.
        Ok(Some(unsafe {
            ptr::read_unaligned(self.slot(index).add(offset).cast::<T>())
        }))
    }

    /// Consumes the element at the consumer index (user-produced rings only); does
    /// nothing when the ring is empty.
    pub fn advance_consumer(&mut self) {
        if self.dir != Direction::FromClient || self.is_empty() {
            return;
        }
        let next = (self.index + 1) & self.mask;
        self.index = next;
        self.index_at(CONSUMER_OFFSET).store(next, Release);
    }

    /// Moves the waiting elements of this ring into `new` (empty, same direction), as
    /// `rxe_queue_resize` does. Fails with `EINVAL`, changing nothing, when they do not
    /// fit.
    ///
    /// For a user-produced ring, user space must not post meanwhile (rdma-core holds the
    /// queue's lock across the verb) and must not have mapped `new` yet: the producer
    /// index of `new` is written here, and this ring is left empty.
    pub fn move_into(&mut self, new: &mut Queue) -> Result {
        if self.dir != new.dir || !new.is_empty() {
            return Err(EINVAL);
        }
        let n = self.count();
        if n > new.capacity() {
            return Err(EINVAL);
        }
        let len = self.elem_size.min(new.slot_size()).min(self.slot_size());
        let mut cons = self.consumer();
        let mut prod = new.producer();
        for _ in 0..n {
            // SAFETY: Both slots are inside their buffers and `len` fits in either; the
            // new ring is not visible to user space yet. User space may be writing the
            // old slot (a user-produced ring): we only copy bytes, parsed when consumed.
            unsafe { ptr::copy_nonoverlapping(self.slot(cons), new.slot(prod), len) };
            prod = (prod + 1) & new.mask;
            cons = (cons + 1) & self.mask;
        }
        new.index_at(PRODUCER_OFFSET).store(prod, Release);
        match self.dir {
            Direction::ToClient => new.index = prod,
            Direction::FromClient => {
                self.index = cons;
                self.index_at(CONSUMER_OFFSET).store(cons, Release);
            }
        }
        Ok(())
    }
}

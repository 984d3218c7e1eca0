// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Host memory backed by byte vectors: registered regions, receive buffers and
//! send work request buffers, with the checks a driver makes before a byte lands.
//!
//! A buffer either holds real bytes (tests compare them) or is a *sink* of a
//! given length: placement into it is validated and counted but not stored,
//! and gathering from it yields zeros. The report uses sinks so that a 64:1
//! incast does not need gigabytes of RAM.

use std::collections::HashMap;

use metaroce_proto::{AtomicOp, Dest, MemError, Memory, QpId};

/// Bytes of a buffer: stored, or only a length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Real bytes.
    Bytes(Vec<u8>),
    /// A sink of this many bytes.
    Sink(usize),
}

impl Backing {
    /// Zeroed real bytes or a sink of `len` bytes.
    pub fn new(len: usize, real: bool) -> Self {
        if real {
            Backing::Bytes(vec![0; len])
        } else {
            Backing::Sink(len)
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Backing::Bytes(v) => v.len(),
            Backing::Sink(n) => *n,
        }
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored bytes, if real.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Backing::Bytes(v) => Some(v),
            Backing::Sink(_) => None,
        }
    }

    fn write(&mut self, off: usize, data: &[u8]) -> Result<(), MemError> {
        let end = off.checked_add(data.len()).ok_or(MemError::Access)?;
        if end > self.len() {
            return Err(MemError::Access);
        }
        if let Backing::Bytes(v) = self {
            v[off..end].copy_from_slice(data);
        }
        Ok(())
    }

    fn read_into(&self, off: usize, len: usize, out: &mut Vec<u8>) -> bool {
        let Some(end) = off.checked_add(len).filter(|&e| e <= self.len()) else {
            return false;
        };
        match self {
            Backing::Bytes(v) => out.extend_from_slice(&v[off..end]),
            Backing::Sink(_) => out.resize(out.len() + len, 0),
        }
        true
    }
}

/// A registered memory region.
#[derive(Clone, Debug)]
pub struct Region {
    /// Virtual address of the first byte.
    pub base: u64,
    /// Contents.
    pub data: Backing,
    /// Remote WRITE allowed.
    pub remote_write: bool,
    /// Remote READ allowed.
    pub remote_read: bool,
    /// Remote atomics allowed.
    pub remote_atomic: bool,
}

impl Region {
    fn offset(&self, va: u64, len: u64) -> Result<usize, MemError> {
        let off = va.checked_sub(self.base).ok_or(MemError::Access)?;
        let end = off.checked_add(len).ok_or(MemError::Access)?;
        if end > self.data.len() as u64 {
            return Err(MemError::Access);
        }
        usize::try_from(off).map_err(|_| MemError::Access)
    }
}

/// A buffer key: connection index, QP and work request id.
pub type BufKey = (usize, QpId, u64);

/// Counters of memory operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    /// Successful placements.
    pub placements: u64,
    /// Bytes placed.
    pub bytes_placed: u64,
    /// Placements refused.
    pub refused: u64,
    /// Atomics executed.
    pub atomics: u64,
}

/// All memory of one host.
#[derive(Clone, Debug, Default)]
pub struct HostMemory {
    /// Regions by rkey.
    pub regions: HashMap<u32, Region>,
    /// Posted receive buffers.
    pub recv: HashMap<BufKey, Backing>,
    /// Send work request buffers: gather source of SEND/WRITE, target of READ/atomic.
    pub send: HashMap<BufKey, Backing>,
    /// Counters.
    pub stats: MemStats,
}

impl HostMemory {
    /// Registers a region.
    pub fn register(&mut self, rkey: u32, region: Region) {
        self.regions.insert(rkey, region);
    }

    /// The view the core of connection `conn` gets.
    pub fn for_conn(&mut self, conn: usize) -> ConnMemory<'_> {
        ConnMemory { mem: self, conn }
    }

    /// Appends `len` bytes of send buffer `key` at `offset` to `out`.
    pub fn gather_wr(&self, key: BufKey, offset: u32, len: u32, out: &mut Vec<u8>) -> bool {
        self.send
            .get(&key)
            .is_some_and(|b| b.read_into(offset as usize, len as usize, out))
    }

    /// Appends `len` bytes of region `rkey` at `va` to `out` (READ responses).
    pub fn gather_mr(&self, rkey: u32, va: u64, len: u32, out: &mut Vec<u8>) -> bool {
        let Some(r) = self.regions.get(&rkey) else {
            return false;
        };
        match r.offset(va, u64::from(len)) {
            Ok(off) => r.data.read_into(off, len as usize, out),
            Err(_) => false,
        }
    }
}

/// [`HostMemory`] as seen by one connection (the [`Memory`] the core calls).
pub struct ConnMemory<'a> {
    mem: &'a mut HostMemory,
    conn: usize,
}

impl ConnMemory<'_> {
    fn place_inner(&mut self, qp: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        match dest {
            Dest::Remote { rkey, va } => {
                let r = self.mem.regions.get_mut(&rkey).ok_or(MemError::Access)?;
                if !r.remote_write {
                    return Err(MemError::Access);
                }
                let off = r.offset(va, data.len() as u64)?;
                r.data.write(off, data)
            }
            Dest::Recv { wr_id, offset } => {
                let b = self
                    .mem
                    .recv
                    .get_mut(&(self.conn, qp, wr_id))
                    .ok_or(MemError::Invalid)?;
                b.write(offset as usize, data)
            }
            Dest::Local { wr_id, offset } => {
                let b = self
                    .mem
                    .send
                    .get_mut(&(self.conn, qp, wr_id))
                    .ok_or(MemError::Invalid)?;
                b.write(offset as usize, data)
            }
        }
    }
}

impl Memory for ConnMemory<'_> {
    fn place(&mut self, qp: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        let r = self.place_inner(qp, dest, data);
        match r {
            Ok(()) => {
                self.mem.stats.placements += 1;
                self.mem.stats.bytes_placed += data.len() as u64;
            }
            Err(_) => self.mem.stats.refused += 1,
        }
        r
    }

    fn check_read(&mut self, _qp: QpId, rkey: u32, va: u64, len: u32) -> Result<(), MemError> {
        let r = self.mem.regions.get(&rkey).ok_or(MemError::Access)?;
        if !r.remote_read {
            return Err(MemError::Access);
        }
        r.offset(va, u64::from(len)).map(|_| ())
    }

    fn atomic(&mut self, _qp: QpId, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        if !va.is_multiple_of(8) {
            return Err(MemError::Invalid);
        }
        let r = self.mem.regions.get_mut(&rkey).ok_or(MemError::Access)?;
        if !r.remote_atomic {
            return Err(MemError::Access);
        }
        let off = r.offset(va, 8)?;
        let Backing::Bytes(v) = &mut r.data else {
            return Ok(0);
        };
        let cell: &mut [u8; 8] = (&mut v[off..off + 8])
            .try_into()
            .map_err(|_| MemError::Access)?;
        let orig = u64::from_ne_bytes(*cell);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        *cell = new.to_ne_bytes();
        self.mem.stats.atomics += 1;
        Ok(orig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_checks_bounds_and_access() {
        let mut m = HostMemory::default();
        m.register(
            7,
            Region {
                base: 0x1000,
                data: Backing::new(16, true),
                remote_write: true,
                remote_read: false,
                remote_atomic: true,
            },
        );
        let q = QpId(0);
        let mut c = m.for_conn(0);
        assert!(c
            .place(
                q,
                Dest::Remote {
                    rkey: 7,
                    va: 0x1008
                },
                &[1; 8]
            )
            .is_ok());
        assert_eq!(
            c.place(
                q,
                Dest::Remote {
                    rkey: 7,
                    va: 0x1009
                },
                &[1; 8]
            ),
            Err(MemError::Access)
        );
        assert_eq!(
            c.place(
                q,
                Dest::Remote {
                    rkey: 8,
                    va: 0x1000
                },
                &[1]
            ),
            Err(MemError::Access)
        );
        assert_eq!(
            c.place(q, Dest::Remote { rkey: 7, va: 0xfff }, &[1]),
            Err(MemError::Access)
        );
        assert_eq!(c.check_read(q, 7, 0x1000, 1), Err(MemError::Access));
        assert_eq!(c.atomic(q, 7, 0x1000, AtomicOp::FetchAdd { add: 5 }), Ok(0));
        assert_eq!(c.atomic(q, 7, 0x1000, AtomicOp::FetchAdd { add: 5 }), Ok(5));
        assert_eq!(m.stats.bytes_placed, 8);
        assert_eq!(m.stats.refused, 3);
    }
}

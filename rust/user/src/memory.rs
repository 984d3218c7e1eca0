// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The endpoint's memory: registered regions, receive buffers and send buffers,
//! with the checks a verbs device makes before a byte lands.

use std::collections::HashMap;

use metaroce_proto::{AtomicOp, Dest, MemError, Memory, QpId};

/// Remote rights of a registered region (verbs `IBV_ACCESS_REMOTE_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// RDMA WRITE.
    pub write: bool,
    /// RDMA READ.
    pub read: bool,
    /// Atomics.
    pub atomic: bool,
}

impl Access {
    /// Every remote right.
    pub const ALL: Access = Access {
        write: true,
        read: true,
        atomic: true,
    };
}

/// A registered memory region.
#[derive(Clone, Debug)]
struct Region {
    base: u64,
    bytes: Vec<u8>,
    access: Access,
}

impl Region {
    /// The offset of `len` bytes at `va`, if they lie inside the region.
    fn offset(&self, va: u64, len: usize) -> Result<usize, MemError> {
        let off = va.checked_sub(self.base).ok_or(MemError::Access)?;
        let off = usize::try_from(off).map_err(|_| MemError::Access)?;
        let end = off.checked_add(len).ok_or(MemError::Access)?;
        if end > self.bytes.len() {
            return Err(MemError::Access);
        }
        Ok(off)
    }
}

/// Memory of one endpoint, keyed by rkey (regions) and work request id (buffers).
#[derive(Clone, Debug, Default)]
pub struct LocalMemory {
    regions: HashMap<u32, Region>,
    recv: HashMap<u64, Vec<u8>>,
    send: HashMap<u64, Vec<u8>>,
}

fn write_at(buf: &mut [u8], offset: u32, data: &[u8]) -> Result<(), MemError> {
    let off = offset as usize;
    let end = off.checked_add(data.len()).ok_or(MemError::Access)?;
    buf.get_mut(off..end)
        .ok_or(MemError::Access)?
        .copy_from_slice(data);
    Ok(())
}

impl LocalMemory {
    /// Registers `bytes` at virtual address `base` under `rkey` (replacing any
    /// region of that key).
    pub fn register(&mut self, rkey: u32, base: u64, bytes: Vec<u8>, access: Access) {
        self.regions.insert(
            rkey,
            Region {
                base,
                bytes,
                access,
            },
        );
    }

    /// The bytes of region `rkey`.
    pub fn region(&self, rkey: u32) -> Option<&[u8]> {
        self.regions.get(&rkey).map(|r| r.bytes.as_slice())
    }

    /// The bytes of region `rkey`, to change locally.
    pub fn region_mut(&mut self, rkey: u32) -> Option<&mut [u8]> {
        self.regions.get_mut(&rkey).map(|r| r.bytes.as_mut_slice())
    }

    /// Sets the local buffer of send work request `wr_id`: the payload of a SEND
    /// or WRITE, the destination of a READ or atomic.
    pub(crate) fn set_send_buf(&mut self, wr_id: u64, bytes: Vec<u8>) {
        self.send.insert(wr_id, bytes);
    }

    /// Takes back the buffer of send work request `wr_id`.
    pub(crate) fn take_send_buf(&mut self, wr_id: u64) -> Option<Vec<u8>> {
        self.send.remove(&wr_id)
    }

    /// Sets a zeroed receive buffer of `len` bytes for receive `wr_id`.
    pub(crate) fn set_recv_buf(&mut self, wr_id: u64, len: usize) {
        self.recv.insert(wr_id, vec![0; len]);
    }

    /// Takes back the buffer of receive `wr_id`.
    pub(crate) fn take_recv_buf(&mut self, wr_id: u64) -> Option<Vec<u8>> {
        self.recv.remove(&wr_id)
    }

    /// Appends `len` bytes of send buffer `wr_id` at `offset` to `out`.
    pub(crate) fn gather_wr(&self, wr_id: u64, offset: u32, len: u32, out: &mut Vec<u8>) -> bool {
        let off = offset as usize;
        let Some(b) = self.send.get(&wr_id) else {
            return false;
        };
        match b.get(off..off.saturating_add(len as usize)) {
            Some(s) => {
                out.extend_from_slice(s);
                true
            }
            None => false,
        }
    }

    /// Appends `len` bytes of region `rkey` at `va` to `out` (READ responses).
    pub(crate) fn gather_mr(&self, rkey: u32, va: u64, len: u32, out: &mut Vec<u8>) -> bool {
        let Some(r) = self.regions.get(&rkey) else {
            return false;
        };
        match r.offset(va, len as usize) {
            Ok(off) => {
                out.extend_from_slice(&r.bytes[off..off + len as usize]);
                true
            }
            Err(_) => false,
        }
    }
}

impl Memory for LocalMemory {
    fn place(&mut self, _qp: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        match dest {
            Dest::Remote { rkey, va } => {
                let r = self.regions.get_mut(&rkey).ok_or(MemError::Access)?;
                if !r.access.write {
                    return Err(MemError::Access);
                }
                let off = r.offset(va, data.len())?;
                r.bytes[off..off + data.len()].copy_from_slice(data);
                Ok(())
            }
            Dest::Recv { wr_id, offset } => {
                let b = self.recv.get_mut(&wr_id).ok_or(MemError::Invalid)?;
                write_at(b, offset, data)
            }
            Dest::Local { wr_id, offset } => {
                let b = self.send.get_mut(&wr_id).ok_or(MemError::Invalid)?;
                write_at(b, offset, data)
            }
        }
    }

    fn check_read(&mut self, _qp: QpId, rkey: u32, va: u64, len: u32) -> Result<(), MemError> {
        let r = self.regions.get(&rkey).ok_or(MemError::Access)?;
        if !r.access.read {
            return Err(MemError::Access);
        }
        r.offset(va, len as usize).map(|_| ())
    }

    fn atomic(&mut self, _qp: QpId, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        if !va.is_multiple_of(8) {
            return Err(MemError::Invalid);
        }
        let r = self.regions.get_mut(&rkey).ok_or(MemError::Access)?;
        if !r.access.atomic {
            return Err(MemError::Access);
        }
        let off = r.offset(va, 8)?;
        let cell: &mut [u8; 8] = (&mut r.bytes[off..off + 8])
            .try_into()
            .map_err(|_| MemError::Access)?;
        // Host byte order, as a verbs device on this host would use.
        let orig = u64::from_ne_bytes(*cell);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } if orig == compare => swap,
            AtomicOp::CompareSwap { .. } => orig,
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        *cell = new.to_ne_bytes();
        Ok(orig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_checks_rkey_access_and_bounds() {
        let mut m = LocalMemory::default();
        m.register(
            7,
            0x1000,
            vec![0; 16],
            Access {
                write: true,
                ..Access::default()
            },
        );
        let q = QpId(0);
        assert_eq!(
            m.place(
                q,
                Dest::Remote {
                    rkey: 7,
                    va: 0x1008
                },
                &[1; 8]
            ),
            Ok(())
        );
        assert_eq!(
            m.place(
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
            m.place(
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
            m.place(q, Dest::Remote { rkey: 7, va: 0xfff }, &[1]),
            Err(MemError::Access)
        );
        assert_eq!(m.check_read(q, 7, 0x1000, 1), Err(MemError::Access));
        assert_eq!(
            m.atomic(q, 7, 0x1000, AtomicOp::FetchAdd { add: 1 }),
            Err(MemError::Access)
        );
        assert_eq!(m.region(7).map(|r| r[8]), Some(1));
    }

    #[test]
    fn atomics_return_the_original_value() {
        let mut m = LocalMemory::default();
        m.register(1, 0, vec![0; 16], Access::ALL);
        let q = QpId(0);
        assert_eq!(m.atomic(q, 1, 8, AtomicOp::FetchAdd { add: 5 }), Ok(0));
        assert_eq!(
            m.atomic(
                q,
                1,
                8,
                AtomicOp::CompareSwap {
                    compare: 5,
                    swap: 9
                }
            ),
            Ok(5)
        );
        assert_eq!(
            m.atomic(
                q,
                1,
                8,
                AtomicOp::CompareSwap {
                    compare: 5,
                    swap: 1
                }
            ),
            Ok(9)
        );
        assert_eq!(
            m.atomic(q, 1, 4, AtomicOp::FetchAdd { add: 1 }),
            Err(MemError::Invalid)
        );
    }
}

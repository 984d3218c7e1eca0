// SPDX-License-Identifier: GPL-2.0

//! Application memory for the protocol core: placement of received payloads and the
//! gathering of payloads to send, always through a checked MR lookup.
//!
//! Every access looks its MR up again by key, PD and access right and runs while the
//! MR is in its table (`MrTable::with_mr`), so a region deregistered while packets are
//! in flight is never touched after `dereg_mr` returns, and this code may run in the
//! receive softirq. Keys come from packets (rkeys) or from user-written WQEs (lkeys):
//! nothing is trusted.

use crate::bound::{Bound, LocalBuffer};
use crate::device::MetaRoceDriver;
use kernel::prelude::*;
use metaroce_proto::{AtomicOp, Dest, MemError, Memory, Payload, QpId};
use rdma::{
    device::Device,
    mr::{self, Access, PdId},
    qp::Sge,
};

/// The memory of the QPs bound to one connection, as the core's [`Memory`].
pub(crate) struct QpMemory<'a> {
    pub(crate) dev: &'a Device<MetaRoceDriver>,
    pub(crate) qps: &'a mut [Option<Bound>],
}

fn bound(qps: &mut [Option<Bound>], qp: QpId) -> Result<&mut Bound, MemError> {
    qps.get_mut(qp.index())
        .and_then(Option::as_mut)
        .ok_or(MemError::Operation)
}

/// Copies `data` into the scatter list `sges` from byte `offset` of the list on.
pub(crate) fn scatter(dev: &Device<MetaRoceDriver>, pd: PdId, sges: &[Sge], offset: u64, data: &[u8]) -> Result {
    let mut skip = offset;
    let mut data = data;
    for sge in sges {
        if data.is_empty() {
            break;
        }
        let len = u64::from(sge.length);
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min(data.len() as u64) as usize;
        let chunk = &data[..n];
        dev.objects()
            .mrs
            .with_mr(sge.lkey, pd, Access::LOCAL_WRITE, |mr| mr.write(sge.addr + skip, chunk))?;
        data = &data[n..];
        skip = 0;
    }
    if data.is_empty() {
        Ok(())
    } else {
        Err(EMSGSIZE)
    }
}

/// Fills `out` from the scatter list `sges`, from byte `offset` of the list on.
pub(crate) fn gather(
    dev: &Device<MetaRoceDriver>,
    pd: PdId,
    sges: &[Sge],
    offset: u64,
    out: &mut [u8],
) -> Result {
    let mut skip = offset;
    let mut pos = 0;
    for sge in sges {
        if pos == out.len() {
            break;
        }
        let len = u64::from(sge.length);
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min((out.len() - pos) as u64) as usize;
        let chunk = &mut out[pos..pos + n];
        dev.objects()
            .mrs
            .with_mr(sge.lkey, pd, Access::LOCAL_READ, |mr| mr.read(sge.addr + skip, chunk))?;
        pos += n;
        skip = 0;
    }
    if pos == out.len() {
        Ok(())
    } else {
        Err(EMSGSIZE)
    }
}

/// Checks that every SGE of a local buffer names an MR of `pd` with `access` and lies
/// inside it: the local protection check at post time.
pub(crate) fn check_sges(dev: &Device<MetaRoceDriver>, pd: PdId, sges: &[Sge], access: Access) -> Result {
    for sge in sges.iter().filter(|s| s.length > 0) {
        dev.objects().mrs.with_mr(sge.lkey, pd, access, |mr| {
            mr.offset_of(sge.addr, u64::from(sge.length)).map(|_| ())
        })?;
    }
    Ok(())
}

/// Fills `out` with the payload the core asked for.
pub(crate) fn gather_payload(
    dev: &Device<MetaRoceDriver>,
    qps: &mut [Option<Bound>],
    payload: &Payload,
    out: &mut [u8],
) -> Result {
    match *payload {
        Payload::Wr { qp, wr_id, offset, .. } => {
            let b = bound(qps, qp).map_err(|_| EINVAL)?;
            let pd = b.qp.pd();
            match b.send_buffer(wr_id)? {
                LocalBuffer::Inline(data) => {
                    let start = offset as usize;
                    let end = start.checked_add(out.len()).ok_or(EINVAL)?;
                    out.copy_from_slice(data.get(start..end).ok_or(EINVAL)?);
                    Ok(())
                }
                LocalBuffer::Sges(sges) => gather(dev, pd, sges, u64::from(offset), out),
            }
        }
        Payload::Mr { qp, rkey, va, .. } => {
            let b = bound(qps, qp).map_err(|_| EINVAL)?;
            dev.objects()
                .mrs
                .with_mr(rkey, b.qp.pd(), Access::REMOTE_READ, |mr| mr.read(va, out))
        }
    }
}

impl Memory for QpMemory<'_> {
    fn take_shared_recv(&mut self, qp: QpId) -> Option<(u64, u32)> {
        bound(self.qps, qp).ok()?.take_recv()
    }

    fn place(&mut self, qp: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        let dev = self.dev;
        let b = bound(self.qps, qp)?;
        let pd = b.qp.pd();
        match dest {
            Dest::Remote { rkey, va } => {
                b.request_arrived();
                if !b.access.contains(Access::REMOTE_WRITE) {
                    return Err(MemError::Access);
                }
                dev.objects()
                    .mrs
                    .with_mr(rkey, pd, Access::REMOTE_WRITE, |mr| mr.write(va, data))
                    .map_err(|_| MemError::Access)
            }
            Dest::Recv { wr_id, offset } => {
                b.request_arrived();
                let sges = b.recv_sges(wr_id).map_err(|_| MemError::Operation)?;
                scatter(dev, pd, sges.as_slice(), u64::from(offset), data).map_err(|_| MemError::Operation)
            }
            Dest::Local { wr_id, offset } => {
                let LocalBuffer::Sges(sges) = b.send_buffer(wr_id).map_err(|_| MemError::Access)? else {
                    return Err(MemError::Access);
                };
                scatter(dev, pd, sges, u64::from(offset), data).map_err(|_| MemError::Access)
            }
        }
    }

    fn check_read(&mut self, qp: QpId, rkey: u32, va: u64, len: u32) -> Result<(), MemError> {
        let b = bound(self.qps, qp)?;
        b.request_arrived();
        if !b.access.contains(Access::REMOTE_READ) {
            return Err(MemError::Access);
        }
        self.dev
            .objects()
            .mrs
            .with_mr(rkey, b.qp.pd(), Access::REMOTE_READ, |mr| {
                mr.offset_of(va, u64::from(len)).map(|_| ())
            })
            .map_err(|_| MemError::Access)
    }

    fn atomic(&mut self, qp: QpId, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        let b = bound(self.qps, qp)?;
        b.request_arrived();
        if !b.access.contains(Access::REMOTE_ATOMIC) {
            return Err(MemError::Access);
        }
        let op = match op {
            AtomicOp::CompareSwap { compare, swap } => mr::AtomicOp::CompareSwap { compare, swap },
            AtomicOp::FetchAdd { add } => mr::AtomicOp::FetchAdd { add },
        };
        // Alignment first: a misaligned address is an invalid request, not an access error.
        if va & 7 != 0 {
            return Err(MemError::Invalid);
        }
        self.dev
            .objects()
            .mrs
            .with_mr(rkey, b.qp.pd(), Access::REMOTE_ATOMIC, |mr| mr.atomic(va, op))
            .map_err(|_| MemError::Access)
    }
}

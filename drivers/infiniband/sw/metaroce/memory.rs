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
use crate::driver::MetaRoceDriver;
use crate::sge::{gather, scatter_from, Source};
use kernel::prelude::*;
use metaroce_proto::{AtomicOp, Dest, MemError, Memory, Payload, QpId, RxPayload};
use rdma::{
    device::Device,
    mr::{Access, PdId},
    qp::{walk_sges, Sge},
    skb::SkBuff,
};

/// The memory of the QPs bound to one connection, as the core's [`Memory`].
pub(crate) struct QpMemory<'a> {
    pub(crate) dev: &'a Device<MetaRoceDriver>,
    pub(crate) qps: &'a mut [Option<Bound>],
    /// The datagram being handled: the buffer and the offset in its data of the
    /// tail of an [`RxPayload`] (the bytes after its head).
    pub(crate) rx: Option<(&'a SkBuff, usize)>,
}

/// The head and the tail of a received payload as sources; the tail is the bytes of
/// `rx`'s buffer from its offset on.
fn sources<'a>(
    data: RxPayload<'a>,
    rx: Option<(&'a SkBuff, usize)>,
) -> Result<[Source<'a>; 2], MemError> {
    let tail = match (data.tail, rx) {
        (0, _) => Source::Bytes(&[]),
        (n, Some((skb, offset)))
            if offset
                .checked_add(n as usize)
                .is_some_and(|end| end <= skb.len()) =>
        {
            Source::Skb {
                skb,
                offset,
                len: n as usize,
            }
        }
        _ => return Err(MemError::Operation),
    };
    Ok([Source::Bytes(data.head), tail])
}

fn bound(qps: &mut [Option<Bound>], qp: QpId) -> Result<&mut Bound, MemError> {
    qps.get_mut(qp.index())
        .and_then(Option::as_mut)
        .ok_or(MemError::Operation)
}

/// Fills `out` with the payload the core asked for.
pub(crate) fn gather_payload(
    dev: &Device<MetaRoceDriver>,
    qps: &mut [Option<Bound>],
    payload: &Payload,
    out: &mut [u8],
) -> Result {
    match *payload {
        Payload::Wr {
            qp, wr_id, offset, ..
        } => {
            let b = bound(qps, qp).map_err(|_| EINVAL)?;
            let pd = b.qp().pd();
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
                .with_mr(rkey, b.qp().pd(), Access::REMOTE_READ, |mr| {
                    mr.read(va, out)
                })
        }
    }
}

/// Appends `len` bytes of the scatter list `sges`, from byte `offset` of the list on,
/// to `skb` as fragments of the regions' pages (no copy).
fn attach(
    dev: &Device<MetaRoceDriver>,
    pd: PdId,
    sges: &[Sge],
    offset: u64,
    len: usize,
    skb: &mut SkBuff,
) -> Result {
    walk_sges(sges, offset, len, |sge, va, _, n| {
        dev.objects()
            .mrs
            .with_mr(sge.lkey, pd, Access::LOCAL_READ, |mr| {
                mr.attach_to(va, n, skb)
            })
    })
}

/// Appends the payload the core asked for to `skb`, which holds the headers, as
/// fragments of the regions' pages: zero-copy transmit. Inline data, kept in the
/// driver's copy of the WQE, is copied. On failure `skb` may hold part of the payload.
pub(crate) fn attach_payload(
    dev: &Device<MetaRoceDriver>,
    qps: &mut [Option<Bound>],
    payload: &Payload,
    skb: &mut SkBuff,
) -> Result {
    match *payload {
        Payload::Wr {
            qp,
            wr_id,
            offset,
            len,
        } => {
            let b = bound(qps, qp).map_err(|_| EINVAL)?;
            let pd = b.qp().pd();
            match b.send_buffer(wr_id)? {
                LocalBuffer::Inline(data) => {
                    let start = offset as usize;
                    let end = start.checked_add(len as usize).ok_or(EINVAL)?;
                    skb.append(data.get(start..end).ok_or(EINVAL)?)
                }
                LocalBuffer::Sges(sges) => {
                    attach(dev, pd, sges, u64::from(offset), len as usize, skb)
                }
            }
        }
        Payload::Mr {
            qp, rkey, va, len, ..
        } => {
            let b = bound(qps, qp).map_err(|_| EINVAL)?;
            dev.objects()
                .mrs
                .with_mr(rkey, b.qp().pd(), Access::REMOTE_READ, |mr| {
                    mr.attach_to(va, len as usize, skb)
                })
        }
    }
}

impl QpMemory<'_> {
    /// Places `parts` ([`Self::place_into`]) and counts them for the QP
    /// (`qp_rx_data`, `qp_rx_bytes`).
    fn place_sources(
        &mut self,
        qp: QpId,
        dest: Dest,
        parts: [Source<'_>; 2],
    ) -> Result<(), MemError> {
        let total: usize = parts.iter().map(Source::len).sum();
        self.place_into(qp, dest, parts)?;
        if let Ok(b) = bound(self.qps, qp) {
            b.qp().data().counters.count_rx(total);
        }
        Ok(())
    }

    /// Places the bytes of `parts`, one after the other, at `dest`; the range of a
    /// remote write is validated as a whole before any byte lands.
    fn place_into(&mut self, qp: QpId, dest: Dest, parts: [Source<'_>; 2]) -> Result<(), MemError> {
        let dev = self.dev;
        let b = bound(self.qps, qp)?;
        let pd = b.qp().pd();
        let total: usize = parts.iter().map(Source::len).sum();
        match dest {
            Dest::Remote { rkey, va } => {
                if !b.access().contains(Access::REMOTE_WRITE) {
                    return Err(MemError::Access);
                }
                dev.objects()
                    .mrs
                    .with_mr(rkey, pd, Access::REMOTE_WRITE, |mr| {
                        mr.offset_of(va, total as u64)?;
                        let mut at = va;
                        for p in &parts {
                            p.write_to(mr, at, 0, p.len())?;
                            at += p.len() as u64;
                        }
                        Ok(())
                    })
                    .map_err(|_| MemError::Access)
            }
            Dest::Recv { wr_id, offset } => {
                let sges = b.recv_sges(wr_id).map_err(|_| MemError::Operation)?;
                place_list(dev, pd, sges.as_slice(), offset, &parts)
                    .map_err(|_| MemError::Operation)
            }
            Dest::Local { wr_id, offset } => {
                let LocalBuffer::Sges(sges) = b.send_buffer(wr_id).map_err(|_| MemError::Access)?
                else {
                    return Err(MemError::Access);
                };
                place_list(dev, pd, sges, offset, &parts).map_err(|_| MemError::Access)
            }
        }
    }
}

/// Scatters `parts`, one after the other, into `sges` from byte `offset` on.
fn place_list(
    dev: &Device<MetaRoceDriver>,
    pd: PdId,
    sges: &[Sge],
    offset: u32,
    parts: &[Source<'_>],
) -> Result {
    let mut at = u64::from(offset);
    for p in parts.iter().filter(|p| p.len() > 0) {
        scatter_from(dev, pd, sges, at, *p)?;
        at += p.len() as u64;
    }
    Ok(())
}

impl Memory for QpMemory<'_> {
    fn take_shared_recv(&mut self, qp: QpId) -> Option<(u64, u32)> {
        bound(self.qps, qp).ok()?.take_recv()
    }

    fn place(&mut self, qp: QpId, dest: Dest, data: &[u8]) -> Result<(), MemError> {
        self.place_sources(qp, dest, [Source::Bytes(data), Source::Bytes(&[])])
    }

    fn place_split(&mut self, qp: QpId, dest: Dest, data: RxPayload<'_>) -> Result<(), MemError> {
        let sources = sources(data, self.rx)?;
        self.place_sources(qp, dest, sources)
    }

    fn check_read(&mut self, qp: QpId, rkey: u32, va: u64, len: u32) -> Result<(), MemError> {
        let b = bound(self.qps, qp)?;
        b.request_arrived();
        if !b.access().contains(Access::REMOTE_READ) {
            return Err(MemError::Access);
        }
        self.dev
            .objects()
            .mrs
            .with_mr(rkey, b.qp().pd(), Access::REMOTE_READ, |mr| {
                mr.offset_of(va, u64::from(len)).map(|_| ())
            })
            .map_err(|_| MemError::Access)
    }

    fn atomic(&mut self, qp: QpId, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        let b = bound(self.qps, qp)?;
        b.request_arrived();
        if !b.access().contains(Access::REMOTE_ATOMIC) {
            return Err(MemError::Access);
        }
        let op = crate::convert::atomic_op(op);
        // Alignment first: a misaligned address is an invalid request, not an access error.
        if va & 7 != 0 {
            return Err(MemError::Invalid);
        }
        self.dev
            .objects()
            .mrs
            .with_mr(rkey, b.qp().pd(), Access::REMOTE_ATOMIC, |mr| {
                mr.atomic(va, op)
            })
            .map_err(|_| MemError::Access)
    }
}

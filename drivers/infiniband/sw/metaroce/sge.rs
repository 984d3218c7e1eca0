// SPDX-License-Identifier: GPL-2.0

//! Local memory through scatter/gather lists: copying into and out of the MRs an SGE
//! list names, and the local protection check of a posted list. Every access looks
//! its MR up again by lkey, PD and access right (`MrTable::with_mr`), as
//! [`crate::memory`] does for the protocol core.

use crate::driver::MetaRoceDriver;
use kernel::prelude::*;
use rdma::{
    device::Device,
    mr::{Access, Mr, PdId},
    qp::{walk_sges, Sge},
    skb::SkBuff,
};

/// Bytes to copy into memory: a slice, or bytes of a socket buffer from `offset` on,
/// which may lie in its pages (copied out, never borrowed).
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Bytes(&'a [u8]),
    Skb {
        skb: &'a SkBuff,
        offset: usize,
        len: usize,
    },
}

impl Source<'_> {
    pub(crate) fn len(&self) -> usize {
        match *self {
            Source::Bytes(b) => b.len(),
            Source::Skb { len, .. } => len,
        }
    }

    /// Copies bytes `[from, from + n)` of the source into `mr` at `va`.
    pub(crate) fn write_to(&self, mr: &Mr, va: u64, from: usize, n: usize) -> Result {
        match *self {
            Source::Bytes(b) => mr.write(
                va,
                b.get(from..from.checked_add(n).ok_or(EINVAL)?)
                    .ok_or(EINVAL)?,
            ),
            Source::Skb { skb, offset, len } => {
                if from.checked_add(n).is_none_or(|end| end > len) {
                    return Err(EINVAL);
                }
                mr.write_from_skb(va, skb, offset + from, n)
            }
        }
    }
}

/// Copies `data` into the scatter list `sges` from byte `offset` of the list on.
pub(crate) fn scatter(
    dev: &Device<MetaRoceDriver>,
    pd: PdId,
    sges: &[Sge],
    offset: u64,
    data: &[u8],
) -> Result {
    scatter_from(dev, pd, sges, offset, Source::Bytes(data))
}

/// Copies the bytes of `src` into the scatter list `sges` from byte `offset` of the
/// list on.
pub(crate) fn scatter_from(
    dev: &Device<MetaRoceDriver>,
    pd: PdId,
    sges: &[Sge],
    offset: u64,
    src: Source<'_>,
) -> Result {
    walk_sges(sges, offset, src.len(), |sge, va, pos, n| {
        dev.objects()
            .mrs
            .with_mr(sge.lkey, pd, Access::LOCAL_WRITE, |mr| {
                src.write_to(mr, va, pos, n)
            })
    })
}

/// Fills `out` from the scatter list `sges`, from byte `offset` of the list on.
pub(crate) fn gather(
    dev: &Device<MetaRoceDriver>,
    pd: PdId,
    sges: &[Sge],
    offset: u64,
    out: &mut [u8],
) -> Result {
    walk_sges(sges, offset, out.len(), |sge, va, pos, n| {
        let chunk = out.get_mut(pos..pos + n).ok_or(EINVAL)?;
        dev.objects()
            .mrs
            .with_mr(sge.lkey, pd, Access::LOCAL_READ, |mr| mr.read(va, chunk))
    })
}

/// Checks that every SGE of a local buffer names an MR of `pd` with `access` and lies
/// inside it: the local protection check at post time.
pub(crate) fn check_sges(
    dev: &Device<MetaRoceDriver>,
    pd: PdId,
    sges: &[Sge],
    access: Access,
) -> Result {
    for sge in sges.iter().filter(|s| s.length > 0) {
        dev.objects().mrs.with_mr(sge.lkey, pd, access, |mr| {
            mr.offset_of(sge.addr, u64::from(sge.length)).map(|_| ())
        })?;
    }
    Ok(())
}

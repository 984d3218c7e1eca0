// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`): an owned packet buffer.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h).
//!
//! A [`SkBuff`] is built for transmission (allocated with headroom for the headers the
//! stack pushes in front of the payload, filled with [`SkBuff::put`] or
//! [`SkBuff::append`], then possibly given a payload of memory-region pages by
//! [`Mr::attach_to`](crate::mr::Mr::attach_to)) or comes from the receive path (see
//! [`udp::Received::into_owned`](crate::udp::Received::into_owned)). Its linear part
//! is [`SkBuff::data`]; paged fragments after it, which may be user memory that
//! changes under us, are only ever copied out
//! ([`Mr::write_from_skb`](crate::mr::Mr::write_from_skb)), never borrowed.

use crate::{bindings, netdev::NetDevice};
use core::ptr::NonNull;
use kernel::{alloc::Flags, prelude::*};

/// Bytes the UDP tunnel pushes in front of a payload, for the larger IP version: an
/// IPv6 header (40) and a UDP header (8). The link-layer header comes on top.
pub const UDP_TUNNEL_HEADROOM: usize = 40 + 8;

/// An owned socket buffer: a linear part, then possibly paged fragments.
///
/// # Invariants
///
/// `self.0` points to a live `sk_buff` of which this value owns one reference (it was
/// never shared with the stack) and whose `dev` is not dereferenced through this type.
/// Its paged fragments are never read through references.
pub struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: An skb that no one else references may be used and freed on any CPU.
unsafe impl Send for SkBuff {}
// SAFETY: `&SkBuff` only gives read access to the bytes and lengths.
unsafe impl Sync for SkBuff {}

impl SkBuff {
    /// Allocates a buffer with `headroom` bytes reserved in front and room for `len`
    /// bytes of data.
    pub fn alloc(headroom: usize, len: usize, flags: Flags) -> Result<Self> {
        let size = headroom.checked_add(len).ok_or(EINVAL)?;
        let size = u32::try_from(size).map_err(|_| EINVAL)?;
        let reserve = i32::try_from(headroom).map_err(|_| EINVAL)?;
        // SAFETY: Plain allocation; `gfp` is one of the kernel's allocation modes.
        let skb = unsafe { bindings::metaroce_alloc_skb(size, gfp(flags)) };
        let skb = NonNull::new(skb).ok_or(ENOMEM)?;
        // SAFETY: The fresh buffer has `size >= headroom` bytes of tailroom and no data.
        unsafe { bindings::metaroce_skb_reserve(skb.as_ptr(), reserve) };
        // INVARIANT: A fresh skb is ours alone.
        Ok(Self(skb))
    }

    /// Allocates a buffer for a UDP tunnel payload of up to `len` bytes sent through
    /// `netdev`: the headroom covers its link-layer header plus
    /// [`UDP_TUNNEL_HEADROOM`].
    pub fn alloc_for_udp(netdev: &NetDevice, len: usize, flags: Flags) -> Result<Self> {
        // SAFETY: `netdev` is live (type invariant of `NetDevice`).
        let ll = unsafe { bindings::metaroce_ll_reserved_space(netdev.as_raw()) } as usize;
        Self::alloc(ll + UDP_TUNNEL_HEADROOM, len, flags)
    }

    /// Takes ownership of an skb.
    ///
    /// # Safety
    ///
    /// `skb` must be a live `sk_buff` whose reference the caller hands over, and no one
    /// may use it through another pointer afterwards.
    pub(crate) unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: Per the function's contract.
        Self(skb)
    }

    /// Gives up ownership, e.g. to hand the buffer to the network stack.
    pub(crate) fn into_raw(self) -> NonNull<bindings::sk_buff> {
        let skb = self.0;
        core::mem::forget(self);
        skb
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Returns the number of data bytes, linear and paged.
    pub fn len(&self) -> usize {
        // SAFETY: The skb is live (type invariant); `len` is only changed through `self`.
        unsafe { (*self.as_raw()).len as usize }
    }

    /// Returns `true` when the buffer holds no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the free space in front of the data.
    pub fn headroom(&self) -> usize {
        // SAFETY: The skb is live.
        unsafe { bindings::metaroce_skb_headroom(self.as_raw()) as usize }
    }

    /// Returns the free space after the data.
    pub fn tailroom(&self) -> usize {
        // SAFETY: The skb is live.
        let room = unsafe { bindings::metaroce_skb_tailroom(self.as_raw()) };
        usize::try_from(room).unwrap_or(0)
    }

    /// Returns the number of bytes in paged fragments, after the linear part.
    pub fn paged_len(&self) -> usize {
        // SAFETY: The skb is live; `data_len` is only changed through `self`.
        unsafe { (*self.as_raw()).data_len as usize }
    }

    /// Returns the linear part of the data (all of it unless [`paged_len`] is nonzero).
    ///
    /// [`paged_len`]: Self::paged_len
    pub fn data(&self) -> &[u8] {
        // SAFETY: The skb is live (type invariant), so the `skb_headlen` bytes from
        // `data` are its initialised linear part, owned by this buffer; they change
        // only through `&mut self`.
        unsafe {
            let len = bindings::metaroce_skb_headlen(self.as_raw()) as usize;
            if len == 0 {
                return &[];
            }
            core::slice::from_raw_parts((*self.as_raw()).data, len)
        }
    }

    /// Returns the linear part of the data, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: As in `data`; `&mut self` makes the access exclusive.
        unsafe {
            let len = bindings::metaroce_skb_headlen(self.as_raw()) as usize;
            if len == 0 {
                return &mut [];
            }
            core::slice::from_raw_parts_mut((*self.as_raw()).data, len)
        }
    }

    /// Makes the first `len` bytes of the data (all of it, if shorter) linear,
    /// copying them out of the fragments if needed; nothing to do when they already
    /// are. Fails with `ENOMEM` when the linear part cannot grow.
    pub fn make_linear(&mut self, len: usize) -> Result {
        let len = u32::try_from(len.min(self.len())).map_err(|_| EINVAL)?;
        // SAFETY: The skb is ours and live; `len` is at most its length.
        if unsafe { bindings::metaroce_pskb_may_pull(self.as_raw(), len) } {
            Ok(())
        } else {
            Err(ENOMEM)
        }
    }

    /// Extends the data by `len` zeroed bytes at the end and returns them.
    ///
    /// Fails with `ENOSPC` when the tailroom is too small, `EINVAL` when the buffer
    /// has paged fragments (the linear part no longer ends the data).
    pub fn put(&mut self, len: usize) -> Result<&mut [u8]> {
        if self.paged_len() != 0 {
            return Err(EINVAL);
        }
        if len > self.tailroom() {
            return Err(ENOSPC);
        }
        let n = u32::try_from(len).map_err(|_| ENOSPC)?;
        // SAFETY: The skb is linear and has `len` bytes of tailroom, so `skb_put` does
        // not overrun (it would panic otherwise) and returns the start of the new area.
        let p = unsafe { bindings::skb_put(self.as_raw(), n) }.cast::<u8>();
        if len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: `p` points to `len` bytes of this buffer, now part of its data and
        // borrowed exclusively through `&mut self`.
        let area = unsafe { core::slice::from_raw_parts_mut(p, len) };
        area.fill(0);
        Ok(area)
    }

    /// Appends `bytes` at the end of the data.
    pub fn append(&mut self, bytes: &[u8]) -> Result {
        self.put(bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    /// Removes `len` bytes from the front of the data, all in the linear part.
    pub fn pull(&mut self, len: usize) -> Result {
        if len > self.data().len() {
            return Err(EINVAL);
        }
        // SAFETY: The linear part holds at least `len` bytes.
        unsafe { bindings::skb_pull(self.as_raw(), len as u32) };
        Ok(())
    }

    /// Frees the buffer as a drop (visible to drop monitors), rather than as consumed.
    pub fn discard(self) {
        let skb = self.into_raw();
        // SAFETY: We owned the only reference.
        unsafe { bindings::metaroce_kfree_skb(skb.as_ptr()) };
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: We own the reference (type invariant); the buffer was used as intended.
        unsafe { bindings::metaroce_consume_skb(self.as_raw()) };
    }
}

/// Bytes a [`GsoBurst`] holds at most: its UDP datagram, header included, must fit the
/// 16-bit UDP and IPv4 length fields.
pub const GSO_BURST_MAX: usize = 65535 - 8 - 60;

/// A burst of UDP payloads of equal size (the last may be shorter) for one
/// destination, kept as one buffer that leaves with UDP segmentation offload
/// (`SKB_GSO_UDP_L4`): the stack, or the netdev, cuts it back into one datagram per
/// payload, each with its own UDP and IP header. One pass through UDP, IP, the qdisc
/// and the netdev for the burst, as a QUIC stack's `UDP_SEGMENT` sends do.
///
/// Built from the first payload's buffer; [`GsoBurst::push`] appends the next ones
/// without copying their paged fragments (only their linear bytes, the headers, are
/// copied, into a page fragment of their own).
pub struct GsoBurst {
    skb: SkBuff,
    seg_len: usize,
    segs: usize,
    /// A payload shorter than `seg_len` was pushed: it must be the last.
    closed: bool,
}

impl GsoBurst {
    /// Starts a burst with `first`, whose length sets the segment size.
    pub fn new(first: SkBuff) -> Self {
        Self {
            seg_len: first.len(),
            skb: first,
            segs: 1,
            closed: false,
        }
    }

    /// Returns the number of payloads in the burst.
    pub fn segments(&self) -> usize {
        self.segs
    }

    /// Returns the segment size: the length of the first payload.
    pub fn segment_len(&self) -> usize {
        self.seg_len
    }

    /// Returns the bytes of all the payloads.
    pub fn len(&self) -> usize {
        self.skb.len()
    }

    /// Returns `true` when the burst holds no data.
    pub fn is_empty(&self) -> bool {
        self.skb.is_empty()
    }

    /// Appends `pkt` as the next payload, or gives it back when it does not fit: longer
    /// than the segment size, after a shorter one, empty, out of fragment slots, or past
    /// [`GSO_BURST_MAX`] bytes (or no memory for its headers).
    pub fn push(&mut self, pkt: SkBuff) -> core::result::Result<(), SkBuff> {
        let len = pkt.len();
        if self.closed || len == 0 || len > self.seg_len || self.seg_len == 0 {
            return Err(pkt);
        }
        // SAFETY: Both buffers are live and ours alone (type invariant of `SkBuff`); the
        // helper either changes neither or moves `pkt`'s fragments, with their page
        // references, to `self.skb` and leaves `pkt` a valid linear buffer.
        let ret = unsafe {
            bindings::metaroce_skb_gso_append(self.skb.as_raw(), pkt.as_raw(), GSO_BURST_MAX as u32)
        };
        if ret != 0 {
            return Err(pkt);
        }
        // `len`, not `pkt.len()`: the helper left `pkt` only its linear part (reading
        // it here closed every burst after its second payload).
        if len < self.seg_len {
            self.closed = true;
        }
        self.segs += 1;
        // `pkt` holds only its copied linear part now.
        drop(pkt);
        Ok(())
    }

    /// Returns the buffer to send: marked for UDP segmentation offload when it holds
    /// more than one payload, the first payload's own buffer otherwise.
    pub fn into_skb(self) -> SkBuff {
        if self.segs > 1 {
            // SAFETY: The skb is ours; its data is `segs` payloads of `seg_len` bytes
            // (the last possibly shorter) and it has the headroom of a UDP tunnel
            // payload, where the UDP header the offset of the checksum refers to goes.
            unsafe {
                bindings::metaroce_skb_set_udp_gso(
                    self.skb.as_raw(),
                    self.seg_len as u32,
                    self.segs as u32,
                )
            };
        }
        self.skb
    }
}

/// The C allocation mode for `flags`: exactly the kernel's `GFP_KERNEL` or
/// `GFP_NOWAIT`, otherwise `GFP_ATOMIC`, which is valid in every context.
pub(crate) fn gfp(flags: Flags) -> bindings::gfp_t {
    use kernel::alloc::flags::{GFP_KERNEL, GFP_NOWAIT};
    if flags == GFP_KERNEL {
        kernel::bindings::GFP_KERNEL
    } else if flags == GFP_NOWAIT {
        kernel::bindings::GFP_NOWAIT
    } else {
        kernel::bindings::GFP_ATOMIC
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Unreliable datagram QPs: one message per datagram, outside the connections.
//!
//! The send doorbell of a UD QP drains its send ring in the calling context: each WQE
//! becomes one datagram (spec, "Unreliable datagrams") to the address of its AH (the
//! `ah_num` of `ibv_create_ah`, or the address vector the provider copied into the WQE)
//! and completes once handed to the network. A received datagram goes to the QP its
//! header names if that QP is a UD QP in RTR or RTS with the same Q_Key; it consumes
//! the next receive (from the QP's ring or its SRQ), which gets the 40-byte GRH area
//! first, as verbs lays it out for RoCE v2 (an IPv4 header in its last 20 bytes, or
//! the IPv6 header), then the payload. Datagrams that find no such QP or no receive,
//! or whose destination is not an address of the device (not in its GID table, as
//! rdma_rxe's `rxe_chk_dgid`), are dropped and counted (`ud_rx_dropped`, and by reason
//! `ud_rx_no_qp`, `ud_rx_bad_qkey`, `ud_rx_not_ours`, `ud_rx_no_recv`), as UD allows.
//!
//! The GSI QP (QP1) of the RDMA core's MAD layer is such a QP owned by a kernel
//! consumer: its work requests arrive through `ib_post_send`/`ib_post_recv` into kernel
//! queues and its buffers are kernel memory, otherwise it is handled the same way.
//! That is what carries the CM's MADs for rdma_cm.

use crate::driver::MetaRoceDriver;
use crate::sge::{gather, scatter};
use core::net::IpAddr;
use kernel::{
    prelude::*,
    sync::{atomic::Relaxed, Arc},
};
use metaroce_proto::{
    constants::UDP_PORT,
    wire::{grh_area, UdHeader, GRH_LEN, MAX_UD_HEADER_LEN},
};
use rdma::{
    cq::{WcOpcode, WcStatus, WorkCompletion, WC_GRH, WC_WITH_IMM},
    device::{Device, DriverQp},
    qp::{
        KernelSend, QpState, RecvWqe, SendData, SendOpcode, SendWqe, WqeAddress, SEND_SIGNALED,
        SEND_SOLICITED,
    },
    skb::SkBuff,
    udp::{Destination, Ecn, Received},
};

/// `enum rdma_network_type` of a RoCE v2 datagram over IPv4 and IPv6.
const RDMA_NETWORK_IPV4: u8 = 2;
const RDMA_NETWORK_IPV6: u8 = 3;

/// A Q_Key with this bit set in a send WQE means "the QP's own Q_Key".
const QKEY_USE_QP: u32 = 0x8000_0000;

/// The send doorbell of a UD QP: sends and completes every waiting WQE.
pub(crate) fn on_send_doorbell(dev: &Device<MetaRoceDriver>, qp: &Arc<DriverQp<MetaRoceDriver>>) {
    let _serial = qp.data().ud_send.lock();
    if qp.is_kernel() {
        while let Some(w) = qp.kernel_send_pop() {
            complete_send(qp, w.wr_id, send_kernel(dev, qp, &w), w.signaled);
        }
        return;
    }
    while let Some(peeked) = qp.sq_peek() {
        let (wr_id, sent, signaled) = match &peeked {
            Ok(w) => (
                w.wr_id,
                send(dev, qp, w),
                qp.sq_sig_all() || w.send_flags & SEND_SIGNALED != 0,
            ),
            Err(b) => (b.wr_id, Err(WcStatus::LocQpOpErr), true),
        };
        qp.sq_advance();
        complete_send(qp, wr_id, sent, signaled);
        if sent.is_err() {
            // A local error moves the QP to ERR; what is left is flushed.
            qp.set_error();
            qp.flush_send_queue();
            qp.flush_recv_queue();
            return;
        }
    }
}

/// Completes a sent WQE: when signaled, and always on error.
fn complete_send(
    qp: &DriverQp<MetaRoceDriver>,
    wr_id: u64,
    sent: Result<(), WcStatus>,
    signaled: bool,
) {
    let status = match sent {
        Ok(()) if !signaled => return,
        Ok(()) => WcStatus::Success,
        Err(s) => s,
    };
    let _ = qp.push_send(&WorkCompletion {
        status,
        ..WorkCompletion::flushed(wr_id, WcOpcode::Send, qp.qpn())
    });
}

/// Where the datagram of `w` goes: its AH, or the address vector in the WQE.
fn address(
    dev: &Device<MetaRoceDriver>,
    qp: &DriverQp<MetaRoceDriver>,
    w: &SendWqe,
) -> Option<WqeAddress> {
    let ud = w.ud.as_ref()?;
    if ud.ah_num == 0 {
        return ud.av;
    }
    let ah = dev.objects().ahs.get(ud.ah_num)?;
    if ah.pd() != qp.pd() {
        return None;
    }
    Some(ah.av().into())
}

/// A user WQE's datagram.
fn send(
    dev: &Device<MetaRoceDriver>,
    qp: &DriverQp<MetaRoceDriver>,
    w: &SendWqe,
) -> Result<(), WcStatus> {
    let imm = match w.opcode {
        SendOpcode::Send => None,
        SendOpcode::SendWithImm => Some(u32::from_be(w.ex)),
        _ => return Err(WcStatus::LocQpOpErr),
    };
    let ud = w.ud.as_ref().ok_or(WcStatus::LocQpOpErr)?;
    let len = usize::try_from(w.length).map_err(|_| WcStatus::LocLenErr)?;
    let to = address(dev, qp, w).ok_or(WcStatus::LocQpOpErr)?;
    let d = Datagram {
        to,
        remote_qpn: ud.remote_qpn,
        remote_qkey: ud.remote_qkey,
        imm,
        solicited: w.send_flags & SEND_SOLICITED != 0,
        len,
    };
    transmit(dev, qp, &d, |out| match &w.payload {
        SendData::Inline { len: n, data } => {
            // `len` is the inline length, so they match; a mismatch is an error, not a panic.
            let data = data
                .get(..*n)
                .filter(|d| d.len() == out.len())
                .ok_or(WcStatus::LocLenErr)?;
            out.copy_from_slice(data);
            Ok(())
        }
        SendData::Sges(l) => {
            gather(dev, qp.pd(), l.as_slice(), 0, out).map_err(|_| WcStatus::LocProtErr)
        }
    })
}

/// A kernel consumer's datagram.
fn send_kernel(
    dev: &Device<MetaRoceDriver>,
    qp: &DriverQp<MetaRoceDriver>,
    w: &KernelSend,
) -> Result<(), WcStatus> {
    let len = usize::try_from(w.buffers.len()).map_err(|_| WcStatus::LocLenErr)?;
    let d = Datagram {
        to: w.dest,
        remote_qpn: w.remote_qpn,
        remote_qkey: w.remote_qkey,
        imm: w.imm.map(u32::from_be),
        solicited: w.solicited,
        len,
    };
    transmit(dev, qp, &d, |out| {
        w.buffers.read(0, out).map_err(|_| WcStatus::LocProtErr)
    })
}

/// What a datagram carries, whoever posted it.
struct Datagram {
    to: WqeAddress,
    remote_qpn: u32,
    remote_qkey: u32,
    imm: Option<u32>,
    solicited: bool,
    len: usize,
}

/// Builds and sends one datagram; `fill` writes its payload.
fn transmit(
    dev: &Device<MetaRoceDriver>,
    qp: &DriverQp<MetaRoceDriver>,
    d: &Datagram,
    fill: impl FnOnce(&mut [u8]) -> Result<(), WcStatus>,
) -> Result<(), WcStatus> {
    // One message per datagram: at most the port's MTU ([MR-UD-1]).
    let len = d.len;
    if len > dev.data().active_mtu().bytes() as usize {
        return Err(WcStatus::LocLenErr);
    }
    let h = UdHeader {
        dst_qpn: d.remote_qpn & 0x00ff_ffff,
        src_qpn: qp.qpn(),
        qkey: if d.remote_qkey & QKEY_USE_QP != 0 {
            qp.attributes().qkey
        } else {
            d.remote_qkey
        },
        imm: d.imm,
        solicited: d.solicited,
    };
    let net = dev.data().net();
    let netdev = net.engine().netdev();
    let mut hdr = [0u8; MAX_UD_HEADER_LEN];
    let hlen = h.emit(&mut hdr).map_err(|_| WcStatus::LocQpOpErr)?;
    let mut skb =
        SkBuff::alloc_for_udp(netdev, hlen + len, GFP_KERNEL).map_err(|_| WcStatus::LocQpOpErr)?;
    skb.append(&hdr[..hlen]).map_err(|_| WcStatus::LocQpOpErr)?;
    fill(skb.put(len).map_err(|_| WcStatus::LocQpOpErr)?)?;
    let dest = Destination {
        src: crate::convert::ip(d.to.src),
        dst: crate::convert::ip(d.to.dst),
        src_port: source_port(qp.qpn(), h.dst_qpn),
        dst_port: UDP_PORT,
        ecn: Ecn::Ect0,
    };
    let sent = skb.len();
    let ret = net.tunnel().send(netdev, &dest, skb);
    if ret.is_ok() {
        net.engine().stats.ud_tx.fetch_add(1, Relaxed);
    }
    net.count_tx(ret, sent);
    // A datagram the network refused is lost, as any datagram may be: the WQE has
    // done its part ([MR-UD-1]).
    Ok(())
}

/// The UDP source port of a QP pair's datagrams: ECMP entropy, stable per pair
/// ([MR-UD-3]), in the dynamic range.
fn source_port(src_qpn: u32, dst_qpn: u32) -> u16 {
    let h = src_qpn.wrapping_mul(0x9e37_79b1) ^ dst_qpn.wrapping_mul(0x85eb_ca6b);
    0xc000 | (h >> 18) as u16
}

/// Why a received UD datagram was dropped (each counted, `ud_rx_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UdDrop {
    /// Its UD header did not parse.
    Malformed,
    /// No UD QP with the header's number in RTR, RTS or SQD.
    NoQp,
    /// The QP's Q_Key differs from the header's.
    BadQkey,
    /// Its destination is none of the device's addresses ([MR-UD-5]).
    NotOurs,
    /// The QP had no receive posted.
    NoRecv,
}

/// Delivers a received datagram whose UD header is linear, or says why it was
/// dropped. The payload is made linear only for a QP that takes it.
pub(crate) fn receive(dev: &Device<MetaRoceDriver>, rx: &mut Received<'_>) -> Result<(), UdDrop> {
    let Ok((h, _)) = UdHeader::parse(rx.payload()) else {
        return Err(UdDrop::Malformed);
    };
    accepting_qp(dev, &h)?;
    // Spec [MR-UD-5]: only to one of the device's addresses (the socket takes the
    // namespace's every address, and routes may bring others to our netdev).
    if !dev.has_roce_gid(rx.info().dst.ip()) {
        return Err(UdDrop::NotOurs);
    }
    if rx.make_linear(usize::MAX).is_err() {
        return Err(UdDrop::Malformed);
    }
    let Ok((h, payload)) = UdHeader::parse(rx.payload()) else {
        return Err(UdDrop::Malformed);
    };
    deliver(dev, rx, &h, payload).ok_or(UdDrop::NoRecv)
}

/// The UD QP that takes a datagram with header `h`: its number, in RTR, RTS or SQD,
/// with the header's Q_Key.
fn accepting_qp(
    dev: &Device<MetaRoceDriver>,
    h: &UdHeader,
) -> Result<Arc<DriverQp<MetaRoceDriver>>, UdDrop> {
    let qp = dev
        .objects()
        .qps
        .get(h.dst_qpn)
        .filter(|qp| qp.qp_type().is_datagram())
        .ok_or(UdDrop::NoQp)?;
    let attrs = qp.attributes();
    if !matches!(attrs.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
        return Err(UdDrop::NoQp);
    }
    if attrs.qkey != h.qkey {
        return Err(UdDrop::BadQkey);
    }
    Ok(qp)
}

fn deliver(
    dev: &Device<MetaRoceDriver>,
    rx: &Received<'_>,
    h: &UdHeader,
    payload: &[u8],
) -> Option<()> {
    let qp = accepting_qp(dev, h).ok()?;
    let info = rx.info();
    let grh = grh_area(
        info.src.ip(),
        info.dst.ip(),
        info.ecn as u8,
        rx.payload().len(),
    );
    let len = GRH_LEN + payload.len();
    let mut wc_flags = WC_GRH;
    if h.imm.is_some() {
        wc_flags |= WC_WITH_IMM;
    }
    let done = |wr_id: u64, status: WcStatus| WorkCompletion {
        wr_id,
        status,
        opcode: WcOpcode::Recv,
        byte_len: len as u32,
        ex: h.imm.map_or(0, u32::to_be),
        qp_num: qp.qpn(),
        src_qp: h.src_qpn,
        wc_flags,
        pkey_index: 0,
        port_num: 1,
        network_hdr_type: match info.src.ip() {
            IpAddr::V4(_) => RDMA_NETWORK_IPV4,
            IpAddr::V6(_) => RDMA_NETWORK_IPV6,
        },
    };
    if qp.is_kernel() {
        let r = qp.kernel_recv_pop()?;
        let status = if r.buffers.len() >= len as u64 {
            match r
                .buffers
                .write(0, &grh)
                .and_then(|()| r.buffers.write(GRH_LEN as u64, payload))
            {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocProtErr,
            }
        } else {
            WcStatus::LocLenErr
        };
        let _ = qp.push_recv(&done(r.wr_id, status), h.solicited);
        return Some(());
    }
    // Receives are consumed one datagram at a time per QP.
    let _serial = qp.data().ud_recv.lock();
    let wqe: RecvWqe = match qp.srq() {
        Some(srq) => srq.take()?,
        None => qp.rq_peek()?,
    };
    let pd = qp.pd();
    let status = match wqe.sges {
        Some(l) if l.total_len() >= (GRH_LEN + payload.len()) as u64 => {
            let placed = scatter(dev, pd, l.as_slice(), 0, &grh)
                .and_then(|()| scatter(dev, pd, l.as_slice(), GRH_LEN as u64, payload));
            if placed.is_ok() {
                WcStatus::Success
            } else {
                WcStatus::LocProtErr
            }
        }
        _ => WcStatus::LocLenErr,
    };
    if qp.srq().is_none() {
        qp.rq_advance();
    }
    let _ = qp.push_recv(&done(wqe.wr_id, status), h.solicited);
    Some(())
}

// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the driver's checks, and the QP's life in the transport engine.
//!
//! The rxe ring mechanics, the state machine tables (`ib_modify_qp_is_ok`) and attribute
//! storage live in `rdma::qp`; this is the driver's policy on top. A QP is bound to the
//! connection to its peer when it enters RTR, gets its send PSN at RTS, is flushed
//! through the connection in ERR, and is unbound at RESET and destroy.

use crate::counters::QpCounters;
use crate::driver::{MetaRoceDriver, MAX_RD_ATOMIC};
use crate::engine::Binding;
use kernel::{
    new_mutex, new_spinlock,
    prelude::*,
    sync::{aref::ARef, Arc, Mutex, SpinLock},
};
use rdma::{
    device::{Device, DriverQp},
    mtu::Mtu,
    qp::{mask, ModifyQp, QpAttributes, QpEvent, QpInit, QpState, QpType},
    restrack::ResourceAttrs,
    sync::SpinLockBh,
    work,
};

/// The driver's state of one QP.
pub(crate) struct MetaRoceQp {
    /// The connection the QP is bound to, from RTR until RESET or destroy.
    binding: Pin<KBox<SpinLock<Option<Binding>>>>,
    /// UD: serializes send doorbells (each drains the send ring).
    pub(crate) ud_send: Pin<KBox<Mutex<()>>>,
    /// UD: serializes the consumption of receives by arriving datagrams.
    pub(crate) ud_recv: Pin<KBox<SpinLockBh<()>>>,
    /// The QP's counters (`rdma statistic qp show`).
    pub(crate) counters: QpCounters,
}

impl MetaRoceQp {
    pub(crate) fn new(_init: &QpInit) -> Result<Self> {
        Ok(Self {
            binding: KBox::pin_init(new_spinlock!(None), GFP_KERNEL_ACCOUNT)?,
            ud_send: KBox::pin_init(new_mutex!(()), GFP_KERNEL_ACCOUNT)?,
            ud_recv: KBox::pin_init(
                rdma::new_spinlock_bh!((), "metaroce_ud_recv"),
                GFP_KERNEL_ACCOUNT,
            )?,
            counters: QpCounters::new(),
        })
    }

    fn binding(&self) -> Option<Binding> {
        self.binding.lock().clone()
    }
}

/// Checks the values of a `modify_qp` request against the device's limits.
pub(crate) fn check_modify(
    dev: &Device<MetaRoceDriver>,
    qp: &DriverQp<MetaRoceDriver>,
    cur: &QpAttributes,
    req: &ModifyQp,
) -> Result {
    let a = &req.attrs;
    if req.has(mask::MAX_QP_RD_ATOMIC) && u32::from(a.max_rd_atomic) > MAX_RD_ATOMIC {
        return Err(EINVAL);
    }
    if req.has(mask::MAX_DEST_RD_ATOMIC) && u32::from(a.max_dest_rd_atomic) > MAX_RD_ATOMIC {
        return Err(EINVAL);
    }
    // `Mtu` only has the IB MTUs, all of which the port supports (max 4096).
    if req.has(mask::PATH_MTU) && a.path_mtu.bytes() > Mtu::Mtu4096.bytes() {
        return Err(EINVAL);
    }
    // A connected QP needs its peer before it can receive.
    if qp.qp_type() == QpType::Rc && cur.state == QpState::Init && req.new_state == QpState::Rtr {
        let av = if req.has(mask::AV) { a.av } else { cur.av };
        let Some(av) = av else {
            return Err(EINVAL);
        };
        // Spec [MR-SEC-9]: a new peer only within the device's connections.
        if !dev
            .data()
            .net()
            .engine()
            .admits(dev, crate::convert::ip(av.dst))
        {
            return Err(ENOSPC);
        }
    }
    Ok(())
}

/// Takes the QP out of its connection.
fn unbind(dev: &Device<MetaRoceDriver>, qp: &DriverQp<MetaRoceDriver>) {
    let b = qp.data().binding.lock().take();
    if let Some(b) = b {
        dev.data().net().engine().unbind(b);
    }
}

/// After a transition.
pub(crate) fn on_modified(
    dev: &Device<MetaRoceDriver>,
    qp: &Arc<DriverQp<MetaRoceDriver>>,
    from: QpState,
    to: QpState,
) {
    if qp.qp_type().is_datagram() {
        match to {
            // No connection: entering ERR flushes what is posted.
            QpState::Err => {
                qp.flush_recv_queue();
                qp.flush_send_queue();
            }
            // Datagrams go out at their doorbell: nothing is ever in progress.
            QpState::Sqd => qp.sq_drained(),
            // What was posted in SQD goes out now.
            QpState::Rts if from == QpState::Sqd => crate::ud::on_send_doorbell(dev, qp),
            _ => {}
        }
        return;
    }
    match to {
        QpState::Rtr if from == QpState::Init => {
            let attrs = qp.attributes();
            match dev.data().net().engine().bind(dev, qp, &attrs) {
                Ok(b) => {
                    // Transitions come one at a time (rdma::qp serializes them), so the
                    // QP has no binding here; one left over would be unbound, never
                    // overwritten (it holds the QP and keeps its connection).
                    let old = qp.data().binding.lock().replace(b);
                    if let Some(old) = old {
                        dev.data().net().engine().unbind(old);
                    }
                }
                Err(e) => {
                    pr_warn!(
                        "{}: QP {}: no connection to its peer ({:?})\n",
                        dev.name(),
                        qp.qpn(),
                        e
                    );
                    qp.set_error();
                    qp.flush_recv_queue();
                    qp.flush_send_queue();
                    qp.raise_event(QpEvent::Fatal);
                }
            }
        }
        QpState::Rts => {
            if let Some(b) = qp.data().binding() {
                b.conn.ready_to_send(dev, b.id, from == QpState::Rtr);
            }
        }
        // The work requests the connection holds complete; no new one starts until
        // the QP is back in RTS.
        QpState::Sqd if from == QpState::Rts => {
            if let Some(b) = qp.data().binding() {
                b.conn.drain_sq(dev, b.id);
            }
        }
        // Entering the error state completes every outstanding work request with
        // `IBV_WC_WR_FLUSH_ERR`, receives first, as rdma_rxe does; the connection
        // first completes, in order, what it holds.
        QpState::Err => match qp.data().binding() {
            Some(b) => b.conn.fail_qp(dev, b.id),
            None => {
                qp.flush_recv_queue();
                qp.flush_send_queue();
            }
        },
        QpState::Reset => unbind(dev, qp),
        _ => {}
    }
}

/// The send doorbell: the QP is in RTS or later; its connection picks up the new
/// WQEs right away. Unbound QPs in the error state flush them.
pub(crate) fn on_send_doorbell(
    dev: &Device<MetaRoceDriver>,
    qp: &Arc<DriverQp<MetaRoceDriver>>,
) -> Result {
    if qp.qp_type().is_datagram() {
        match qp.state() {
            // A kernel consumer may post with interrupts disabled (the MAD layer
            // does): its datagrams go out from a work item.
            QpState::Rts if qp.is_kernel() => {
                let (dev, qp) = (ARef::from(dev), qp.clone());
                work::system_percpu()
                    .try_spawn(GFP_ATOMIC, move || crate::ud::on_send_doorbell(&dev, &qp))
                    .map_err(|_| ENOMEM)?;
            }
            QpState::Rts => crate::ud::on_send_doorbell(dev, qp),
            // Sent when the QP is back in RTS.
            QpState::Sqd => {}
            _ => {
                qp.flush_send_queue();
            }
        }
        return Ok(());
    }
    match qp.data().binding() {
        Some(b) => b.conn.doorbell(dev, b.id),
        None => {
            if qp.state() == QpState::Err {
                qp.flush_send_queue();
            }
        }
    }
    Ok(())
}

/// The QP's driver attributes in `rdma -dd resource show qp` (bound RC QPs: its
/// connection, stream and counters).
pub(crate) fn resource(qp: &DriverQp<MetaRoceDriver>, attrs: &mut ResourceAttrs<'_>) -> Result {
    match qp.data().binding() {
        Some(b) => b.conn.write_resource(b.id, attrs),
        None => Ok(()),
    }
}

/// The QP is being destroyed: outstanding work is dropped without completions.
pub(crate) fn on_destroying(dev: &Device<MetaRoceDriver>, qp: &Arc<DriverQp<MetaRoceDriver>>) {
    unbind(dev, qp);
}

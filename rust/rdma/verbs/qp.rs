// SPDX-License-Identifier: GPL-2.0

//! The QP verbs (`create_qp`, `modify_qp`, `destroy_qp`, `post_send`,
//! `fill_res_qp_entry`): the device's limits, quota and QP table and the driver's
//! hooks around [`qp`](crate::qp).

use crate::{
    bindings,
    device::{Device, Driver},
    qp::{self, QpLimits, QpObject},
    restrack::ResourceAttrs,
};
use kernel::error::from_result;

pub(crate) unsafe extern "C" fn create_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: The core passes a live QP of one of our devices.
        let dev = unsafe { Device::<T>::from_raw((*ibqp).device) };
        let lim = T::device_attributes(dev);
        let limits = QpLimits {
            max_qp_wr: lim.max_qp_wr,
            max_send_sge: lim.max_send_sge,
            max_recv_sge: lim.max_recv_sge,
        };
        let objects = dev.objects();
        let taken = objects.quotas.qp.take(lim.max_qp)?;
        // SAFETY: The verb's arguments, zeroed driver part included.
        unsafe {
            qp::create(ibqp, init, udata, &limits, &objects.qps, |init| {
                T::new_qp(dev, init)
            })
        }?;
        taken.keep();
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn modify_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    attr_mask: kernel::ffi::c_int,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: The core passes a live QP of one of our devices.
        let dev = unsafe { Device::<T>::from_raw((*ibqp).device) };
        // SAFETY: The verb's arguments.
        unsafe {
            qp::modify(
                ibqp,
                attr,
                attr_mask,
                |qp, attrs, req| T::check_modify_qp(dev, qp, attrs, req),
                |qp, from, to| T::qp_modified(dev, qp, from, to),
            )
        }?;
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn destroy_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The core destroys a live QP of one of our devices once.
    let dev = unsafe { Device::<T>::from_raw((*ibqp).device) };
    let objects = dev.objects();
    // SAFETY: As above, when no other verb runs on it.
    unsafe {
        qp::destroy(ibqp, &objects.quotas.qp, &objects.qps, |qp| {
            T::qp_destroying(dev, qp)
        })
    };
    0
}

pub(crate) unsafe extern "C" fn post_send<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> kernel::ffi::c_int {
    // SAFETY: The core passes a live QP of one of our devices.
    let dev = unsafe { Device::<T>::from_raw((*ibqp).device) };
    // SAFETY: The consumer's arguments, as the verb's.
    unsafe { qp::post_send(ibqp, wr, bad_wr, |qp| T::send_doorbell(dev, qp)) }
}

/// `fill_res_qp_entry`: the driver's attributes of a QP for `rdma -dd resource show qp`.
pub(crate) unsafe extern "C" fn fill_res_qp_entry<T: Driver>(
    msg: *mut bindings::sk_buff,
    ibqp: *mut bindings::ib_qp,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: ib_core passes a live QP of ours (it holds a restrack reference).
        let (dev, qp) = unsafe {
            (
                Device::<T>::from_raw((*ibqp).device),
                QpObject::<T::Qp>::get(ibqp)?,
            )
        };
        // SAFETY: `msg` is the message being built, which only this callback writes
        // meanwhile.
        unsafe { ResourceAttrs::fill(msg, |attrs| T::qp_resource(dev, &qp, attrs)) }?;
        Ok(0)
    })
}

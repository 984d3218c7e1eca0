// SPDX-License-Identifier: GPL-2.0

//! The completion queue verbs (`create_cq`, `destroy_cq`, `resize_user_cq`): the
//! device's limits and quota around [`cq`](crate::cq).

use crate::{
    bindings, cq,
    device::{Device, Driver},
};
use kernel::error::from_result;

pub(crate) unsafe extern "C" fn create_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: The core passes a live CQ of one of our devices.
        let dev = unsafe { Device::<T>::from_raw((*ibcq).device) };
        let lim = T::device_attributes(dev);
        let taken = dev.objects().quotas.cq.take(lim.max_cq)?;
        // SAFETY: The verb's arguments, zeroed driver part included.
        unsafe { cq::create(ibcq, attr, attrs, lim.max_cqe) }?;
        taken.keep();
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn destroy_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The core destroys a live CQ of one of our devices once.
    let dev = unsafe { Device::<T>::from_raw((*ibcq).device) };
    // SAFETY: As above, with no QP using it any more.
    unsafe { cq::destroy(ibcq, &dev.objects().quotas.cq) };
    0
}

pub(crate) unsafe extern "C" fn resize_user_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    cqe: kernel::ffi::c_uint,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The core passes a live CQ of one of our devices.
    let dev = unsafe { Device::<T>::from_raw((*ibcq).device) };
    // SAFETY: The verb's arguments.
    unsafe { cq::resize(ibcq, cqe, udata, T::device_attributes(dev).max_cqe) }
}

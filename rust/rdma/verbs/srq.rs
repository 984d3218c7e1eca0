// SPDX-License-Identifier: GPL-2.0

//! The shared receive queue verbs (`create_srq`, `modify_srq`, `destroy_srq`): the
//! device's limits, quota and SRQ table around [`srq`](crate::srq).

use crate::{
    bindings,
    device::{Device, Driver},
    srq::{self, SrqLimits},
};
use kernel::error::from_result;

pub(crate) unsafe extern "C" fn create_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: The core passes a live SRQ of one of our devices.
        let dev = unsafe { Device::<T>::from_raw((*ibsrq).device) };
        let lim = T::device_attributes(dev);
        let limits = SrqLimits {
            max_wr: lim.max_srq_wr,
            max_sge: lim.max_srq_sge,
            max_srq: lim.max_srq,
        };
        let objects = dev.objects();
        // SAFETY: The verb's arguments, zeroed driver part included.
        unsafe {
            srq::create(
                ibsrq,
                init,
                udata,
                limits,
                &objects.quotas.srq,
                &objects.srqs,
            )
        }?;
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn modify_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The core passes a live SRQ of one of our devices.
    let dev = unsafe { Device::<T>::from_raw((*ibsrq).device) };
    // SAFETY: The verb's arguments.
    unsafe {
        srq::modify(
            ibsrq,
            attr,
            mask,
            udata,
            T::device_attributes(dev).max_srq_wr,
        )
    }
}

pub(crate) unsafe extern "C" fn destroy_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The core destroys a live SRQ of one of our devices once.
    let dev = unsafe { Device::<T>::from_raw((*ibsrq).device) };
    // SAFETY: As above, with no QP using it any more.
    unsafe { srq::destroy(ibsrq, &dev.objects().quotas.srq, &dev.objects().srqs) };
    0
}

// SPDX-License-Identifier: GPL-2.0

//! The memory region verbs (`reg_user_mr`, `dereg_mr`): the device's limits, quota and
//! key table around [`mr`](crate::mr).

use crate::{
    bindings,
    device::{Device, Driver},
    mr::{self, Access, PdId},
};
use kernel::prelude::*;

pub(crate) unsafe extern "C" fn reg_user_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: kernel::ffi::c_int,
    dmah: *mut bindings::ib_dmah,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: The core passes a live PD of one of our devices.
    let (dev, pd) = unsafe { (Device::<T>::from_raw((*ibpd).device), PdId::from_raw(ibpd)) };
    let register = || {
        if !dmah.is_null() || udata.is_null() {
            return Err(EOPNOTSUPP);
        }
        let access = Access::from_bits(access as u32);
        access.check_mr()?;
        let lim = T::device_attributes(dev);
        if length == 0 || length > lim.max_mr_size {
            return Err(EINVAL);
        }
        let taken = dev.objects().quotas.mr.take(lim.max_mr)?;
        // SAFETY: A live device of ours and its MR table, in the verb's context.
        let mr = unsafe {
            mr::register_user(
                dev.as_raw(),
                &dev.objects().mrs,
                pd,
                start,
                length,
                iova,
                access,
            )
        }?;
        taken.keep();
        Ok(mr)
    };
    register().unwrap_or_else(|e| e.to_ptr())
}

pub(crate) unsafe extern "C" fn dereg_mr<T: Driver>(
    ibmr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    // SAFETY: The MR's device is live while it has MRs.
    let dev = unsafe { Device::<T>::from_raw((*ibmr).device) };
    // SAFETY: The core deregisters a live MR of ours once.
    if unsafe { mr::deregister(ibmr, &dev.objects().mrs) } {
        dev.objects().quotas.mr.put();
    }
    0
}

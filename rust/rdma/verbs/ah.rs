// SPDX-License-Identifier: GPL-2.0

//! The address handle verbs (`create_ah`, `create_user_ah`, `destroy_ah`): the
//! device's quota and AH table around [`Ah`].

use crate::{
    ah::{Ah, AhObject},
    av::AddressVector,
    bindings,
    device::{Device, Driver},
    mr::PdId,
    udata::UData,
};
use kernel::{error::from_result, prelude::*, sync::Arc, transmute::AsBytes};

/// `struct rxe_create_ah_resp`.
#[repr(C)]
struct CreateAhResp {
    ah_num: u32,
    reserved: u32,
}

// SAFETY: `repr(C)` integers, no padding.
unsafe impl AsBytes for CreateAhResp {}

pub(crate) unsafe extern "C" fn create_ah<T: Driver>(
    ibah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: The core passes a live AH of one of our devices; the attribute holds
        // its source GID attribute for the call.
        let (dev, av, udata, pd) = unsafe {
            (
                Device::<T>::from_raw((*ibah).device),
                AddressVector::from_raw(&*(*init).ah_attr)?,
                UData::from_raw(udata),
                PdId::from_raw((*ibah).pd),
            )
        };
        if av.port_num != 1 {
            return Err(EINVAL);
        }
        let taken = dev
            .objects()
            .quotas
            .ah
            .take(T::device_attributes(dev).max_ah)?;
        // The CM creates AHs under spinlocks (without `RDMA_CREATE_AH_SLEEPABLE`), and the
        // AH is made under the table's lock: never sleep here.
        let num = dev
            .objects()
            .ahs
            .insert_atomic(|num| Ok(Arc::new(Ah::new(num, pd, av), GFP_ATOMIC)?))?;
        // Providers older than the response get no number, as with rdma_rxe.
        if let Some(u) = udata.filter(|u| u.outlen() >= size_of::<CreateAhResp>()) {
            if let Err(e) = u.write(&CreateAhResp {
                ah_num: num,
                reserved: 0,
            }) {
                dev.objects().ahs.remove(num);
                return Err(e);
            }
        }
        let ah = dev.objects().ahs.get(num).ok_or(EINVAL)?;
        // SAFETY: The core zeroed our part; the AH is not visible yet.
        unsafe { AhObject::from_raw_mut(ibah).obj = Some(ah) };
        taken.keep();
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn destroy_ah<T: Driver>(
    ibah: *mut bindings::ib_ah,
    _flags: u32,
) -> kernel::ffi::c_int {
    // SAFETY: The core destroys a live AH of ours once.
    let (dev, obj) = unsafe {
        (
            Device::<T>::from_raw((*ibah).device),
            AhObject::from_raw_mut(ibah),
        )
    };
    if let Some(ah) = obj.obj.take() {
        dev.objects().quotas.ah.put();
        dev.objects().ahs.remove(ah.num());
    }
    0
}

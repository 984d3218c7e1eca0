// SPDX-License-Identifier: GPL-2.0

//! Address handles (`struct ib_ah`) for UD work requests.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! rdma-core's rxe provider copies the address vector into each UD send WQE itself and
//! also passes the AH number (`struct rxe_create_ah_resp`); the device keeps every AH in
//! a table by number so the transport can resolve either.

use crate::{av::AddressVector, bindings, mr::PdId, object::Object};
use kernel::{error::from_result, prelude::*};

/// An address handle.
pub struct Ah {
    num: u32,
    pd: PdId,
    av: AddressVector,
}

impl Ah {
    /// AH number `num` of protection domain `pd`, to address `av`.
    pub(crate) fn new(num: u32, pd: PdId, av: AddressVector) -> Self {
        Self { num, pd, av }
    }

    /// The AH number user space puts into UD WQEs.
    pub fn num(&self) -> u32 {
        self.num
    }

    /// The protection domain.
    pub fn pd(&self) -> PdId {
        self.pd
    }

    /// The address vector.
    pub fn av(&self) -> &AddressVector {
        &self.av
    }
}

/// The core's `ib_ah` followed by ours.
pub(crate) type AhObject = Object<bindings::ib_ah, Ah>;

/// AH numbers: 0 means "no AH" to rdma_rxe's older providers.
pub(crate) const AH_NUM_MIN: u32 = 1;
pub(crate) const AH_NUM_MAX: u32 = (1 << 24) - 1;

pub(crate) unsafe extern "C" fn query_ah(
    ibah: *mut bindings::ib_ah,
    attr: *mut bindings::rdma_ah_attr,
) -> kernel::ffi::c_int {
    // SAFETY: Live AH of ours; `attr` valid for writes.
    from_result(|| unsafe {
        let ah = AhObject::from_raw(ibah).obj.as_ref().ok_or(EINVAL)?;
        *attr = Default::default();
        ah.av.to_raw(&mut *attr);
        Ok(0)
    })
}

// SPDX-License-Identifier: GPL-2.0

//! Driver attributes of a resource in the RDMA netlink resource view
//! (`rdma -dd resource show qp`).
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)
//! (`rdma_nl_put_driver_*`).

use crate::bindings;
use core::marker::PhantomData;
use kernel::{error::to_result, prelude::*, str::CStr};

/// The netlink message that `fill_res_*_entry` fills, for the driver's attributes.
pub struct ResourceAttrs<'a> {
    msg: *mut bindings::sk_buff,
    _msg: PhantomData<&'a mut bindings::sk_buff>,
}

impl ResourceAttrs<'_> {
    /// Runs `f` with the driver attributes' nest of `msg` open: closes it when `f`
    /// succeeds, takes it back out of the message when `f` fails.
    ///
    /// # Safety
    ///
    /// `msg` is the message ib_core passed to a `fill_res_*_entry` callback, live and
    /// written by nothing else while this runs.
    pub(crate) unsafe fn fill(
        msg: *mut bindings::sk_buff,
        f: impl FnOnce(&mut ResourceAttrs<'_>) -> Result,
    ) -> Result {
        // SAFETY: `msg` is valid per the function's contract.
        let nest = unsafe { bindings::metaroce_nla_nest_start_driver(msg) };
        if nest.is_null() {
            return Err(EMSGSIZE);
        }
        let r = f(&mut ResourceAttrs {
            msg,
            _msg: PhantomData,
        });
        // SAFETY: `nest` was opened in `msg` above and nothing after it was closed.
        unsafe {
            match r {
                Ok(()) => bindings::metaroce_nla_nest_end(msg, nest),
                Err(_) => bindings::metaroce_nla_nest_cancel(msg, nest),
            }
        }
        r
    }

    /// Adds a `u32` attribute `name` (`EMSGSIZE` when the message is full).
    pub fn u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: `msg` is valid per the type's invariant; `name` is NUL-terminated and
        // copied into the message.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32(self.msg, name.as_char_ptr(), value) })
    }

    /// Adds a `u64` attribute `name` (`EMSGSIZE` when the message is full).
    pub fn u64(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: As for `u32`.
        to_result(unsafe { bindings::rdma_nl_put_driver_u64(self.msg, name.as_char_ptr(), value) })
    }

    /// Adds a `u32` attribute `name` shown in hexadecimal.
    pub fn u32_hex(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: As for `u32`.
        to_result(unsafe {
            bindings::rdma_nl_put_driver_u32_hex(self.msg, name.as_char_ptr(), value)
        })
    }
}

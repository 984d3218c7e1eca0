// SPDX-License-Identifier: GPL-2.0

//! The verbs ops table (`struct ib_device_ops`) of a driver's devices, the device's own
//! callbacks in it and registration with it ([`Device::register`]), as rdma_rxe's
//! rxe_verbs.c. The top of the crate: the callbacks that need the driver (its limits,
//! quotas, object tables and hooks) are here, one file per object (`verbs/ah.rs`,
//! `cq`, `mr`, `qp`, `srq`, the counters' `stats` and `counter`), and call down into
//! the object files for the object's own part; callbacks that need no driver (`query_*`,
//! `poll_cq`, `post_recv`, `mmap`, ...) stay with their objects. Nothing below imports
//! this file or the device back.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

mod ah;
mod counter;
mod cq;
mod mr;
mod qp;
mod srq;
mod stats;

use crate::{
    bindings,
    device::{Device, Driver, PortAttributes, Registry},
    mmap,
    netdev::NetDevice,
};
use core::{marker::PhantomData, ptr};
use kernel::{
    error::{from_result, to_result},
    prelude::*,
    sync::{aref::ARef, Arc},
    ThisModule,
};

/// The user ABI version of the Soft-RoCE (rxe) provider in rdma-core.
const RXE_UVERBS_ABI_VERSION: u32 = 2;

impl<T: Driver> Device<T> {
    /// Allocates a device bound to `netdev`, initialises its data and registers it with
    /// the RDMA core under `name` (which may contain `%d`), with driver `T`'s verbs.
    ///
    /// On success the RDMA core owns the device (see the `device` module's
    /// documentation).
    pub fn register(
        registry: &Arc<Registry<T>>,
        netdev: &NetDevice,
        name: &CStr,
        data: impl PinInit<T::Data, Error>,
    ) -> Result {
        let ops = ops::<T>(registry.module());
        Self::register_with_ops(registry, netdev, name, data, &ops)
    }
}

/// The ops table of driver `T`'s devices.
pub(crate) fn ops<T: Driver>(module: &'static ThisModule) -> bindings::ib_device_ops {
    let mut ops = bindings::ib_device_ops {
        owner: module.as_ptr().cast(),
        driver_id: bindings::rdma_driver_id_RDMA_DRIVER_RXE,
        uverbs_abi_ver: RXE_UVERBS_ABI_VERSION,
        query_device: Some(Adapter::<T>::query_device),
        query_port: Some(Adapter::<T>::query_port),
        get_port_immutable: Some(Adapter::<T>::get_port_immutable),
        get_link_layer: Some(Adapter::<T>::get_link_layer),
        get_netdev: Some(Adapter::<T>::get_netdev),
        alloc_hw_port_stats: stats::Adapter::<T>::ALLOC,
        get_hw_stats: stats::Adapter::<T>::GET,
        query_pkey: Some(Adapter::<T>::query_pkey),
        alloc_ucontext: Some(Adapter::<T>::alloc_ucontext),
        dealloc_ucontext: Some(Adapter::<T>::dealloc_ucontext),
        disassociate_ucontext: Some(Adapter::<T>::disassociate_ucontext),
        alloc_pd: Some(Adapter::<T>::alloc_pd),
        dealloc_pd: Some(Adapter::<T>::dealloc_pd),
        dealloc_driver: Some(Adapter::<T>::dealloc_driver),
        mmap: Some(mmap::mmap),
        mmap_free: Some(mmap::mmap_free),
        get_dma_mr: Some(crate::mr::get_dma_mr),
        reg_user_mr: Some(mr::reg_user_mr::<T>),
        dereg_mr: Some(mr::dereg_mr::<T>),
        rereg_user_mr: Some(crate::mr::rereg_user_mr),
        create_cq: Some(cq::create_cq::<T>),
        destroy_cq: Some(cq::destroy_cq::<T>),
        resize_user_cq: Some(cq::resize_user_cq::<T>),
        req_notify_cq: Some(crate::cq::req_notify_cq),
        poll_cq: Some(crate::cq::poll_cq),
        create_qp: Some(qp::create_qp::<T>),
        modify_qp: Some(qp::modify_qp::<T>),
        query_qp: Some(crate::qp::query_qp::<T::Qp>),
        fill_res_qp_entry: Some(qp::fill_res_qp_entry::<T>),
        destroy_qp: Some(qp::destroy_qp::<T>),
        post_send: Some(qp::post_send::<T>),
        post_recv: Some(crate::qp::post_recv::<T::Qp>),
        create_srq: Some(srq::create_srq::<T>),
        modify_srq: Some(srq::modify_srq::<T>),
        query_srq: Some(crate::srq::query_srq),
        destroy_srq: Some(srq::destroy_srq::<T>),
        create_ah: Some(ah::create_ah::<T>),
        create_user_ah: Some(ah::create_ah::<T>),
        destroy_ah: Some(ah::destroy_ah::<T>),
        query_ah: Some(crate::ah::query_ah),
        size_ib_ucontext: size_of::<bindings::ib_ucontext>(),
        size_ib_pd: size_of::<bindings::ib_pd>(),
        size_ib_cq: crate::cq::CqObject::SIZE,
        size_ib_qp: crate::qp::QpObject::<T::Qp>::SIZE,
        size_ib_ah: crate::ah::AhObject::SIZE,
        size_ib_srq: crate::srq::SrqObject::SIZE,
        ..Default::default()
    };
    counter::Adapter::<T>::set_ops(&mut ops);
    ops
}

/// The C callbacks of [`Device`], each forwarding to the driver `T`.
struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    /// The netdev and attributes of port `port` of `ib` (port 1 is the only one).
    ///
    /// # Safety
    ///
    /// `ib` is a live device of this driver.
    unsafe fn port(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> Result<(ARef<NetDevice>, PortAttributes)> {
        if port != 1 {
            return Err(EINVAL);
        }
        // SAFETY: `ib` is a live device of this driver (the caller's contract).
        let dev = unsafe { Device::<T>::from_raw(ib) };
        let netdev = dev.netdev().ok_or(ENODEV)?;
        let attributes = T::port_attributes(dev, &netdev);
        Ok((netdev, attributes))
    }

    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: The RDMA core only calls us on live devices of this driver.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            // SAFETY: `udata` is NULL or valid; the core requires drivers to reject input.
            if !udata.is_null() && unsafe { (*udata).inlen } != 0 {
                return Err(EINVAL);
            }
            let a = T::device_attributes(dev);
            // SAFETY: Live device; `node_guid` is set before registration.
            let guid = unsafe { (*ib).node_guid };
            // SAFETY: `attr` is valid for writes for the duration of the call.
            let attr = unsafe { &mut *attr };
            *attr = bindings::ib_device_attr::default();
            attr.fw_ver = a.fw_ver;
            attr.sys_image_guid = guid;
            attr.max_mr_size = a.max_mr_size;
            attr.page_size_cap = a.page_size_cap;
            attr.vendor_id = a.vendor_id;
            attr.vendor_part_id = a.vendor_part_id;
            attr.hw_ver = a.hw_ver;
            attr.max_qp = a.max_qp;
            attr.max_qp_wr = a.max_qp_wr;
            attr.device_cap_flags = a.device_cap_flags;
            // Kernel consumers (the MAD layer) address memory by kernel virtual address with
            // the device's local DMA key (0), as with rdma_rxe's virtual DMA.
            attr.kernel_cap_flags = u64::from(
                bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG
                    | bindings::ib_kernel_cap_flags_IBK_LOCAL_DMA_LKEY,
            );
            attr.max_send_sge = a.max_send_sge;
            attr.max_recv_sge = a.max_recv_sge;
            attr.max_sge_rd = a.max_sge_rd;
            attr.max_cq = a.max_cq;
            attr.max_cqe = a.max_cqe;
            attr.max_mr = a.max_mr;
            attr.max_pd = a.max_pd;
            attr.max_qp_rd_atom = a.max_qp_rd_atom;
            attr.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
            attr.max_res_rd_atom = a.max_res_rd_atom;
            attr.atomic_cap = if a.atomics {
                bindings::ib_atomic_cap_IB_ATOMIC_HCA
            } else {
                bindings::ib_atomic_cap_IB_ATOMIC_NONE
            };
            attr.max_ah = a.max_ah;
            attr.max_srq = a.max_srq;
            attr.max_srq_wr = a.max_srq_wr;
            attr.max_srq_sge = a.max_srq_sge;
            attr.max_pkeys = 1;
            attr.local_ca_ack_delay = a.local_ca_ack_delay;
            Ok(0)
        })
    }

    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: The RDMA core only calls us on live devices of this driver.
            let (netdev, p) = unsafe { Self::port(ib, port) }?;
            // SAFETY: `attr` is valid for writes (the core zeroes it beforehand).
            let attr = unsafe { &mut *attr };
            attr.max_mtu = p.max_mtu as u32;
            attr.active_mtu = p.active_mtu as u32;
            attr.phys_mtu = p.phys_mtu;
            attr.gid_tbl_len = clamp_i32(p.gid_tbl_len);
            attr.pkey_tbl_len = p.pkey_tbl_len;
            attr.max_msg_sz = p.max_msg_sz;
            attr.port_cap_flags = p.port_cap_flags;
            attr.max_vl_num = 1;
            let up = netdev.is_port_active();
            attr.state = if up {
                bindings::ib_port_state_IB_PORT_ACTIVE
            } else {
                bindings::ib_port_state_IB_PORT_DOWN
            };
            attr.phys_state = if up {
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8
            } else {
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8
            };
            // SAFETY: Live device, valid out-pointers into `attr`.
            to_result(unsafe {
                bindings::ib_get_eth_speed(ib, port, &mut attr.active_speed, &mut attr.active_width)
            })?;
            Ok(0)
        })
    }

    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        immutable: *mut bindings::ib_port_immutable,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            // SAFETY: The RDMA core only calls us on live devices of this driver.
            let (_, p) = unsafe { Self::port(ib, port) }?;
            // SAFETY: `immutable` is valid for writes.
            let immutable = unsafe { &mut *immutable };
            immutable.core_cap_flags = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
            immutable.pkey_tbl_len = p.pkey_tbl_len.into();
            immutable.gid_tbl_len = clamp_i32(p.gid_tbl_len);
            immutable.max_mad_size = bindings::IB_MGMT_MAD_SIZE;
            Ok(0)
        })
    }

    unsafe extern "C" fn get_link_layer(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> bindings::rdma_link_layer {
        bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
    }

    unsafe extern "C" fn get_netdev(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::net_device {
        if port != 1 {
            return ptr::null_mut();
        }
        // SAFETY: The RDMA core calls us on live devices of this driver, from
        // allocation (after `register` set the fields) to deallocation.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        // The core takes over the reference (`ib_device_get_netdev` returns it held).
        dev.netdev()
            .map_or(ptr::null_mut(), |n| ARef::into_raw(n).as_ptr().cast())
    }

    unsafe extern "C" fn query_pkey(
        _ib: *mut bindings::ib_device,
        _port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> kernel::ffi::c_int {
        if index != 0 {
            return EINVAL.to_errno();
        }
        // SAFETY: `pkey` is valid for writes.
        unsafe { *pkey = 0xffff };
        0
    }

    unsafe extern "C" fn alloc_ucontext(
        uctx: *mut bindings::ib_ucontext,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: The core passes a live user context of one of our live devices.
        let dev = unsafe { Device::<T>::from_raw((*uctx).device) };
        from_result(|| T::alloc_ucontext(dev).map(|()| 0))
    }

    unsafe extern "C" fn dealloc_ucontext(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: As in `alloc_ucontext`.
        let dev = unsafe { Device::<T>::from_raw((*uctx).device) };
        T::dealloc_ucontext(dev)
    }

    unsafe extern "C" fn disassociate_ucontext(_uctx: *mut bindings::ib_ucontext) {
        // The rings mapped into user space are vmalloc memory that stays valid (through
        // its page references) until user space unmaps it, so nothing needs revoking;
        // having the callback lets the device go away while user contexts are open.
    }

    unsafe extern "C" fn alloc_pd(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: The core passes a live PD of one of our live devices.
        let dev = unsafe { Device::<T>::from_raw((*pd).device) };
        from_result(|| {
            let taken = dev
                .objects()
                .quotas
                .pd
                .take(T::device_attributes(dev).max_pd)?;
            T::alloc_pd(dev)?;
            taken.keep();
            Ok(0)
        })
    }

    unsafe extern "C" fn dealloc_pd(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> kernel::ffi::c_int {
        // SAFETY: As in `alloc_pd`.
        let dev = unsafe { Device::<T>::from_raw((*pd).device) };
        T::dealloc_pd(dev);
        dev.objects().quotas.pd.put();
        0
    }

    unsafe extern "C" fn dealloc_driver(ib: *mut bindings::ib_device) {
        // SAFETY: Called exactly once per registered device, after every other callback
        // has returned and before the memory is freed; all fields are initialised.
        unsafe { Device::<T>::dealloc_driver(ib.cast()) };
    }
}

fn clamp_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`): allocation, registration, the driver's hooks and
//! its object tables.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! A driver implements [`Driver`]; [`Device::register`] (in the verbs layer, which owns
//! the ops table) allocates an `ib_device` with the driver's data behind it, binds it
//! to a network device and registers it with the RDMA core. From then on the RDMA core
//! owns the device: it is unregistered by `rdma link del`, by the driver (e.g. when its
//! netdev goes away) or by [`Registry::unregister_all`] at module exit, and the
//! driver's data is dropped in the `dealloc_driver` callback. Every device of a driver
//! is tracked in its [`Registry`], which is how the driver finds a device by netdev and
//! how module exit fences all of them.

use crate::{
    ah::{self, Ah},
    bindings,
    mr::{self, MrTable},
    mtu::Mtu,
    netdev::{NetDevice, NetDeviceId},
    qp::{self, ModifyQp, Qp, QpAttributes, QpInit, QpState},
    quota::Quotas,
    restrack::ResourceAttrs,
    srq::{self, Srq},
    stats::CounterDesc,
    table::Table,
};
use core::ptr::{self, NonNull};
use kernel::{
    error::to_result,
    prelude::*,
    sync::{
        aref::{ARef, AlwaysRefCounted},
        Arc, SpinLockIrq,
    },
    types::Opaque,
    ThisModule,
};

/// What a device can do (`struct ib_device_attr`), as reported by `ibv_devinfo`.
#[derive(Clone, Debug, Default)]
pub struct DeviceAttributes {
    /// Largest memory region in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes (bitmask).
    pub page_size_cap: u64,
    /// IEEE vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Firmware version (shown by `ibv_devinfo` as a.b.c).
    pub fw_ver: u64,
    /// Maximum number of QPs.
    pub max_qp: u32,
    /// Maximum outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// `IB_DEVICE_*` capability flags.
    pub device_cap_flags: u64,
    /// Maximum scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Maximum scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Maximum scatter/gather entries per RDMA READ.
    pub max_sge_rd: u32,
    /// Maximum number of CQs.
    pub max_cq: u32,
    /// Maximum entries per CQ.
    pub max_cqe: u32,
    /// Maximum number of memory regions.
    pub max_mr: u32,
    /// Maximum number of protection domains.
    pub max_pd: u32,
    /// Maximum outstanding RDMA READ/atomic requests a QP accepts as responder.
    pub max_qp_rd_atom: u32,
    /// Maximum outstanding RDMA READ/atomic requests a QP issues as requester.
    pub max_qp_init_rd_atom: u32,
    /// Maximum RDMA READ/atomic resources in the device.
    pub max_res_rd_atom: u32,
    /// Whether atomics are supported (`IB_ATOMIC_HCA` when true).
    pub atomics: bool,
    /// Maximum number of address handles.
    pub max_ah: u32,
    /// Maximum number of shared receive queues.
    pub max_srq: u32,
    /// Maximum work requests per SRQ.
    pub max_srq_wr: u32,
    /// Maximum scatter/gather entries per SRQ work request.
    pub max_srq_sge: u32,
    /// Local CA ACK delay (4.096 us * 2^n).
    pub local_ca_ack_delay: u8,
}

/// What a port can do (`struct ib_port_attr`). Its state comes from the netdev.
#[derive(Clone, Debug)]
pub struct PortAttributes {
    /// Largest supported MTU.
    pub max_mtu: Mtu,
    /// MTU in use, derived from the netdev's MTU.
    pub active_mtu: Mtu,
    /// The netdev's MTU in bytes.
    pub phys_mtu: u32,
    /// GID table length.
    pub gid_tbl_len: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Largest message in bytes.
    pub max_msg_sz: u32,
    /// `IB_PORT_*` capability flags.
    pub port_cap_flags: u32,
}

/// A QP of driver `T`: a [`Qp`] with the driver's data for it ([`Driver::Qp`]).
pub type DriverQp<T> = Qp<<T as Driver>::Qp>;

/// The verbs a driver implements for its devices.
///
/// Callbacks run in process context and may sleep.
pub trait Driver: Sized + Send + Sync + 'static {
    /// Per-device data of the driver, dropped when the device is deallocated.
    type Data: Send + Sync;

    /// Node description shown by `ibv_devinfo -v` and in sysfs.
    const NODE_DESC: &'static CStr;

    /// Returns the device attributes; called once at registration.
    fn device_attributes(dev: &Device<Self>) -> DeviceAttributes;

    /// Returns the port attributes; the state is filled in from the netdev.
    fn port_attributes(dev: &Device<Self>, netdev: &NetDevice) -> PortAttributes;

    /// Names of the port's counters (`rdma statistic show link DEV/1`); none by default.
    const HW_COUNTERS: &'static [CounterDesc] = &[];

    /// Reads the port's counters, one value per [`Driver::HW_COUNTERS`] entry.
    fn hw_counters(_dev: &Device<Self>, _values: &mut [u64]) {}

    /// How many of the last [`Driver::HW_COUNTERS`] are per QP (`rdma statistic qp`,
    /// see [`crate::counter`]); none by default. The port reports 0 for them.
    const QP_COUNTERS: usize = 0;

    /// Reads the per-QP counters of `qp` since its creation, one value per
    /// [`Driver::QP_COUNTERS`]. Process context, under ib_core's counter mutex.
    fn qp_counters(_qp: &DriverQp<Self>, _values: &mut [u64]) {}

    /// A user context is being created (`ibv_open_device`).
    fn alloc_ucontext(_dev: &Device<Self>) -> Result {
        Ok(())
    }

    /// A user context is being destroyed.
    fn dealloc_ucontext(_dev: &Device<Self>) {}

    /// A protection domain is being allocated.
    fn alloc_pd(_dev: &Device<Self>) -> Result {
        Ok(())
    }

    /// A protection domain is being freed.
    fn dealloc_pd(_dev: &Device<Self>) {}

    /// The driver's state of each queue pair (e.g. the transport's connection).
    type Qp: Send + Sync;

    /// Creates the driver's state of a new QP. The QP is validated and its rings exist;
    /// it becomes visible (in [`Objects::qps`]) when this returns.
    fn new_qp(dev: &Device<Self>, init: &QpInit) -> Result<Self::Qp>;

    /// Checks a `modify_qp` request against the driver's limits, after the transition
    /// and mask passed `ib_modify_qp_is_ok`. Runs under the QP's spinlock: must not sleep.
    fn check_modify_qp(
        _dev: &Device<Self>,
        _qp: &DriverQp<Self>,
        _cur: &QpAttributes,
        _req: &ModifyQp,
    ) -> Result {
        Ok(())
    }

    /// A `modify_qp` succeeded: the attributes are stored and the QP went from `from` to
    /// `to` (which may be equal). Process context; runs before the QP's next transition
    /// and its [`Driver::qp_destroying`] (under the QP's `modify` mutex), which may not
    /// start meanwhile.
    fn qp_modified(_dev: &Device<Self>, _qp: &Arc<DriverQp<Self>>, _from: QpState, _to: QpState) {}

    /// User space rang the send doorbell of `qp` (its state is RTS or later): new WQEs
    /// may be in the send ring. Process context; must not block for long.
    fn send_doorbell(dev: &Device<Self>, qp: &Arc<DriverQp<Self>>) -> Result;

    /// `qp` is being destroyed: it is unlisted; the driver must stop using its rings and
    /// CQs before returning (they are detached right after). Process context, never
    /// during [`Driver::qp_modified`].
    fn qp_destroying(_dev: &Device<Self>, _qp: &Arc<DriverQp<Self>>) {}

    /// Adds the driver's attributes of `qp` to the RDMA netlink resource view
    /// (`rdma -dd resource show qp`); none by default. Process context.
    fn qp_resource(
        _dev: &Device<Self>,
        _qp: &Arc<DriverQp<Self>>,
        _attrs: &mut ResourceAttrs<'_>,
    ) -> Result {
        Ok(())
    }
}

/// The verbs objects of a device, by number, for the transport to look up.
#[pin_data]
pub struct Objects<T: Driver> {
    /// Memory regions by key index (`key >> 8`); see [`MrTable::with_mr`].
    #[pin]
    pub mrs: MrTable,
    /// Queue pairs by QP number.
    #[pin]
    pub qps: Table<DriverQp<T>>,
    /// Address handles by AH number.
    #[pin]
    pub ahs: Table<Ah>,
    /// Shared receive queues by number.
    #[pin]
    pub srqs: Table<Srq>,
    /// The live objects of each kind, against the device's limits.
    pub quotas: Quotas,
}

impl<T: Driver> Objects<T> {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            mrs <- Table::new(mr::MR_INDEX_MIN, mr::MR_INDEX_MAX),
            qps <- Table::new(qp::QPN_MIN, qp::QPN_MAX),
            ahs <- Table::new(ah::AH_NUM_MIN, ah::AH_NUM_MAX),
            srqs <- Table::new(srq::SRQ_NUM_MIN, srq::SRQ_NUM_MAX),
            quotas: Quotas::new(),
        })
    }
}

/// An RDMA device of driver `T`: the C `ib_device` followed by the driver's data.
///
/// # Invariants
///
/// - `ib` was allocated by `_ib_alloc_device` with the size of `Self`, so the whole
///   struct is one allocation owned by the RDMA core.
/// - `registry`, `netdev` and `data` are initialised by [`Device::register`] before the
///   device is visible to anyone, until `dealloc_driver` (or the failed registration
///   path) drops them.
///
/// The netdev is not given to the RDMA core with `ib_device_set_netdev`: that would put
/// the device in the core's netdev-to-device hash, where `ib_device_get_by_netdev(ndev,
/// RDMA_DRIVER_RXE)` finds it, and rdma_rxe (whose driver id we share so that rdma-core's
/// rxe provider binds) would take it for its own `struct rxe_dev`: its netdev notifier
/// would drop a reference on rdma_rxe's UDP socket for us, and its port 4791 receive
/// would cast us. The core asks `ops.get_netdev` instead ([`Device::netdev`]), which is
/// all its GID table, netlink and CM need; the port events that the core's notifier
/// sends for hashed devices come from the driver ([`Device::dispatch_port_state`]).
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    registry: Arc<Registry<T>>,
    netdev: NetDeviceId,
    /// The netdev of port 1, held from registration until the netdev is unregistered
    /// ([`Registry::detach_netdev`]) or the device is deallocated.
    port_netdev: Pin<KBox<SpinLockIrq<Option<ARef<NetDevice>>>>>,
    data: Pin<KBox<T::Data>>,
    objects: Pin<KBox<Objects<T>>>,
}

// SAFETY: The RDMA core serialises what needs it; `T::Data` is `Send + Sync`, the other
// fields are immutable after registration.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: As above.
unsafe impl<T: Driver> Sync for Device<T> {}

// SAFETY: `ib_device_try_get`/`ib_device_put` are the registration reference count of an
// ib_device; while one is held the device is registered and its memory is live.
unsafe impl<T: Driver> AlwaysRefCounted for Device<T> {
    fn inc_ref(&self) {
        // SAFETY: The caller holds a reference, so the count is not zero and this succeeds.
        unsafe { bindings::metaroce_ib_device_try_get(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference.
        unsafe { bindings::ib_device_put(obj.cast().as_ptr()) };
    }
}

impl<T: Driver> Device<T> {
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// # Safety
    ///
    /// `ib` must be the `ib` field of a live `Device<T>` whose fields are initialised, and
    /// it must stay so for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is the first field of the `repr(C)` struct (offset 0).
        unsafe { &*ib.cast::<Self>() }
    }

    /// Returns the driver's data.
    pub fn data(&self) -> &T::Data {
        &self.data
    }

    /// Returns the device's verbs objects.
    pub fn objects(&self) -> &Objects<T> {
        &self.objects
    }

    /// Returns the identity of the netdev this device was created on.
    pub fn netdev_id(&self) -> NetDeviceId {
        self.netdev
    }

    /// Returns the device's name, e.g. `mroce0`.
    pub fn name(&self) -> &CStr {
        // SAFETY: `name` is an array inside the live device; the RDMA core writes it
        // NUL-terminated at allocation and rename, under the device's locks.
        let name = unsafe { &(*self.as_raw()).name };
        // SAFETY: Same memory viewed as bytes: `c_char` and `u8` have one size and alignment.
        let bytes = unsafe { core::slice::from_raw_parts(name.as_ptr().cast::<u8>(), name.len()) };
        CStr::from_bytes_until_nul(bytes).unwrap_or(c"")
    }

    /// Returns the netdev bound to port 1, if it is still attached (it is detached when
    /// the netdev starts unregistering, before the device is).
    pub fn netdev(&self) -> Option<ARef<NetDevice>> {
        self.port_netdev.lock().clone()
    }

    /// Returns `true` when port 1's GID table holds `addr` (an IPv4 address as its
    /// IPv4-mapped GID) as a RoCE v2 GID: an address of the device's netdev. What
    /// rdma_rxe's `rxe_chk_dgid` asks of a received datagram's destination. Any context.
    pub fn has_roce_gid(&self, addr: core::net::IpAddr) -> bool {
        let raw = match addr {
            core::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            core::net::IpAddr::V6(a) => a.octets(),
        };
        let gid = bindings::ib_gid { raw };
        // SAFETY: The device is live and `gid` outlives the call; with a NULL netdev
        // the GID's own netdev is not compared. The lookup takes the table's IRQ-safe
        // read lock and returns a held attribute or an error pointer.
        let attr = unsafe {
            bindings::rdma_find_gid_by_port(
                self.as_raw(),
                &gid,
                bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
                1,
                ptr::null_mut(),
            )
        };
        match kernel::error::from_err_ptr(attr.cast_mut()) {
            Ok(attr) => {
                // SAFETY: A held attribute from the lookup, released once.
                unsafe { bindings::rdma_put_gid_attr(attr) };
                true
            }
            Err(_) => false,
        }
    }

    /// Sends the port event (`IB_EVENT_PORT_ACTIVE` or `IB_EVENT_PORT_ERR`) for the
    /// state of `netdev` if it is this device's netdev and the state changed since the
    /// last event: what the RDMA core's netdev notifier does for the devices it knows
    /// the netdev of. Process context.
    pub fn dispatch_port_state(&self, netdev: &NetDevice) {
        // SAFETY: Both are live; the function finds the port through `ops.get_netdev`
        // and does nothing for a netdev that is not ours.
        unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), netdev.as_raw()) };
    }

    /// [`Device::register`] with the driver's verbs `ops` (the verbs layer builds them).
    pub(crate) fn register_with_ops(
        registry: &Arc<Registry<T>>,
        netdev: &NetDevice,
        name: &CStr,
        data: impl PinInit<T::Data, Error>,
        ops: &bindings::ib_device_ops,
    ) -> Result {
        let data = KBox::pin_init(data, GFP_KERNEL)?;
        let objects = KBox::pin_init(Objects::new(), GFP_KERNEL)?;
        let port_netdev = KBox::pin_init(
            kernel::new_spinlock_irq!(Some(ARef::from(netdev)), "metaroce_port_netdev"),
            GFP_KERNEL,
        )?;
        // SAFETY: `netdev` is live; `dev_net` returns its namespace.
        let net = unsafe { bindings::metaroce_dev_net(netdev.as_raw()) };
        let size = size_of::<Self>();
        // SAFETY: The size covers an `ib_device` at offset 0 followed by our fields; the
        // RDMA core zeroes the allocation and initialises the `ib_device` part.
        let ib = unsafe { bindings::_ib_alloc_device(size, net) };
        if ib.is_null() {
            return Err(ENOMEM);
        }
        let this = ib.cast::<Self>();
        // SAFETY: Fields of the fresh allocation, valid for writes.
        unsafe {
            (&raw mut (*this).data).write(data);
            (&raw mut (*this).objects).write(objects);
            (&raw mut (*this).registry).write(registry.clone());
            (&raw mut (*this).netdev).write(netdev.id());
            (&raw mut (*this).port_netdev).write(port_netdev);
        }
        // INVARIANT: All fields are initialised from here on.
        // SAFETY: `this` is fully initialised and exclusively ours until registered.
        let dev = unsafe { &*this };
        if let Err(e) = dev.setup_and_register(registry, netdev, name, ops) {
            // SAFETY: The registration failed, so the device is ours again. The ops are
            // set, so `ib_dealloc_device` calls our `dealloc_driver`, which drops the
            // fields (`setup_and_register` already unlisted it).
            unsafe { bindings::ib_dealloc_device(ib) };
            return Err(e);
        }
        Ok(())
    }

    fn setup_and_register(
        &self,
        registry: &Arc<Registry<T>>,
        netdev: &NetDevice,
        name: &CStr,
        ops: &bindings::ib_device_ops,
    ) -> Result {
        let ib = self.as_raw();
        // SAFETY: The device is not registered yet: we are its only user.
        unsafe {
            bindings::metaroce_ib_mark_name_assigned_by_user(ib);
            let desc = T::NODE_DESC.to_bytes();
            let node_desc = &mut (*ib).node_desc;
            let n = desc.len().min(node_desc.len() - 1);
            for (dst, src) in node_desc.iter_mut().zip(&desc[..n]) {
                *dst = *src;
            }
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = 1;
            (*ib).num_comp_vectors = 1;
            (*ib).local_dma_lkey = 0;
            (*ib).node_guid = node_guid(netdev).to_be();
            (*ib).uverbs_cmd_mask |= 1u64
                << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND
                | 1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
            bindings::ib_set_device_ops(ib, ops);
        }
        let this = NonNull::from(self);
        registry.insert(this)?;
        // SAFETY: Fully set up. On failure the core hands the device back to us; on
        // success it may be unregistered (and freed) at any time after this returns, so
        // `self` is not touched afterwards.
        let ret = to_result(unsafe {
            bindings::ib_register_device(ib, name.as_char_ptr(), ptr::null_mut())
        });
        if ret.is_err() {
            registry.remove(this);
        }
        ret
    }

    /// `dealloc_driver`: unlists the device from its registry and drops the fields that
    /// follow the `ib_device`.
    ///
    /// # Safety
    ///
    /// `this` must be a fully initialised device the RDMA core is deallocating (every
    /// other callback has returned); its fields are not used afterwards.
    pub(crate) unsafe fn dealloc_driver(this: *mut Self) {
        // SAFETY: Per the function's contract the device and its fields are live.
        unsafe { (*this).registry.remove(NonNull::new_unchecked(this)) };
        // SAFETY: As above; the registry no longer lists it.
        unsafe { Self::drop_driver_fields(this) };
    }

    /// Drops the fields that follow the `ib_device`.
    ///
    /// # Safety
    ///
    /// `this` must be fully initialised, its fields are not used afterwards.
    unsafe fn drop_driver_fields(this: *mut Self) {
        // SAFETY: Per the function's contract.
        unsafe {
            ptr::drop_in_place(&raw mut (*this).objects);
            ptr::drop_in_place(&raw mut (*this).data);
            ptr::drop_in_place(&raw mut (*this).registry);
            ptr::drop_in_place(&raw mut (*this).port_netdev);
        }
    }
}

/// Node GUID from the netdev's MAC address (EUI-48 to EUI-64, as `addrconf_addr_eui48`),
/// or 0 when the netdev has none.
fn node_guid(netdev: &NetDevice) -> u64 {
    let Some(m) = netdev.mac_address() else {
        return 0;
    };
    u64::from_be_bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
}

/// The devices of one driver.
///
/// # Invariants
///
/// Every pointer in `devices` is a `Device<T>` between its insertion in
/// [`Device::register`] and its removal in `dealloc_driver` (or the failed registration
/// path), during which its memory is live.
#[pin_data]
pub struct Registry<T: Driver> {
    #[pin]
    /// Taken in softirq context too (the transport finds its device there).
    devices: crate::sync::SpinLockBh<KVec<DevicePtr<T>>>,
    module: &'static ThisModule,
}

struct DevicePtr<T: Driver>(NonNull<Device<T>>);

// SAFETY: Only used as an identity and, under the registry lock, to take references on
// a device that is `Send + Sync`.
unsafe impl<T: Driver> Send for DevicePtr<T> {}

impl<T: Driver> Registry<T> {
    /// The module the devices belong to.
    pub(crate) fn module(&self) -> &'static ThisModule {
        self.module
    }

    /// Creates an empty registry for the devices of `module`.
    pub fn new(module: &'static ThisModule) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devices <- crate::new_spinlock_bh!(KVec::new(), "metaroce_registry"),
                module,
            }),
            GFP_KERNEL,
        )
    }

    fn insert(&self, dev: NonNull<Device<T>>) -> Result {
        self.devices.lock().push(DevicePtr(dev), GFP_ATOMIC)?;
        Ok(())
    }

    fn remove(&self, dev: NonNull<Device<T>>) {
        let mut devices = self.devices.lock();
        if let Some(i) = devices.iter().position(|d| d.0 == dev) {
            devices.remove(i).ok();
        }
    }

    /// Returns the number of devices, registered or being unregistered.
    pub fn len(&self) -> usize {
        self.devices.lock().len()
    }

    /// Returns `true` when there is no device.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns a reference to the registered device bound to `netdev`, if any.
    pub fn get_by_netdev(&self, netdev: NetDeviceId) -> Option<ARef<Device<T>>> {
        let devices = self.devices.lock();
        devices.iter().find_map(|d| {
            // SAFETY: By the type invariant the device's memory is live while it is in
            // the list, which we hold locked.
            let dev = unsafe { d.0.as_ref() };
            if dev.netdev != netdev {
                return None;
            }
            // SAFETY: As above; `try_get` fails once the device is being unregistered.
            let got = unsafe { bindings::metaroce_ib_device_try_get(dev.as_raw()) };
            // SAFETY: `try_get` took the reference the `ARef` now owns.
            got.then(|| unsafe { ARef::from_raw(d.0) })
        })
    }

    /// Lets go of `netdev` on every device bound to it, registered or being unregistered:
    /// their `ops.get_netdev` returns NULL from now on, as the RDMA core requires once a
    /// netdev is unregistering, and the reference they held is dropped.
    pub fn detach_netdev(&self, netdev: NetDeviceId) {
        let devices = self.devices.lock();
        for d in devices.iter() {
            // SAFETY: Live while listed (type invariant); the list is locked.
            let dev = unsafe { d.0.as_ref() };
            if dev.netdev == netdev {
                // `dev_put` may run under spinlocks.
                drop(dev.port_netdev.lock().take());
            }
        }
    }

    /// Starts unregistering `dev` without waiting (used from netdev notifier context).
    pub fn unregister_queued(dev: ARef<Device<T>>) {
        // SAFETY: We hold a registration reference, as the function requires.
        unsafe { bindings::ib_unregister_device_queued(dev.as_raw()) };
    }

    /// Unregisters every device and returns once all are deallocated: the fence a
    /// module needs before it unloads. New devices must already be impossible.
    pub fn unregister_all(&self) {
        loop {
            let mut pinned = KVec::new();
            {
                let devices = self.devices.lock();
                for d in devices.iter() {
                    // SAFETY: Live while listed (type invariant); pinning the `struct
                    // device` keeps the memory live after it is unlisted.
                    unsafe { bindings::metaroce_ib_device_pin(d.0.as_ptr().cast()) };
                    if pinned
                        .push(d.0.as_ptr().cast::<bindings::ib_device>(), GFP_ATOMIC)
                        .is_err()
                    {
                        // SAFETY: Pinned just above.
                        unsafe { bindings::metaroce_ib_device_unpin(d.0.as_ptr().cast()) };
                        break;
                    }
                }
            }
            if pinned.is_empty() {
                return;
            }
            for ib in pinned {
                // SAFETY: The memory is pinned. Unregistering a device that is already
                // (being) unregistered waits for that to finish, so when this returns
                // its `dealloc_driver` has run, as `ib_unregister_driver` relies on.
                unsafe {
                    bindings::ib_unregister_device(ib);
                    bindings::metaroce_ib_device_unpin(ib);
                }
            }
        }
    }
}

/// `IB_DEVICE_*` capability flags for [`DeviceAttributes::device_cap_flags`].
pub struct DeviceCaps;

impl DeviceCaps {
    /// The device generates port ACTIVE events.
    pub const PORT_ACTIVE_EVENT: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
    /// The device reports a system image GUID.
    pub const SYS_IMAGE_GUID: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
    /// RC QPs generate RNR NAKs.
    pub const RC_RNR_NAK_GEN: u64 = bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64;
    /// SRQs can be resized (`ibv_modify_srq` of `max_wr`).
    pub const SRQ_RESIZE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64;
}

/// `IB_PORT_*` capability flags for [`PortAttributes::port_cap_flags`].
pub struct PortCaps;

impl PortCaps {
    /// Connection management is supported.
    pub const CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
}

/// Returns `true` when `netdev` already has an rdma_rxe device (or another device of
/// the Soft-RoCE driver id that gave the RDMA core its netdev; ours do not).
pub fn netdev_has_soft_roce_device(netdev: &NetDevice) -> bool {
    // SAFETY: `netdev` is live; a non-NULL result is a reference we drop at once.
    unsafe {
        let dev = bindings::ib_device_get_by_netdev(
            netdev.as_raw(),
            bindings::rdma_driver_id_RDMA_DRIVER_RXE,
        );
        if dev.is_null() {
            return false;
        }
        bindings::ib_device_put(dev);
    }
    true
}

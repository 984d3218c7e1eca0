// SPDX-License-Identifier: GPL-2.0

//! The devices' side of the MetaRoCE UDP tunnel: per-namespace sockets on
//! [`UDP_PORT`], receive dispatch by ingress netdev, per-device counters and the debugfs
//! test transmitter.
//!
//! A received datagram goes to the transport engine of the device of the netdev it
//! came in on (or is counted as `rx_no_device` in its namespace).

use crate::device::MetaRoceDriver;
use crate::engine::{Engine, TRANSPORT_COUNTERS};
use core::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    str::FromStr,
};
use kernel::{
    debugfs::{self, Dir},
    new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, SpinLockIrq,
    },
    uaccess::UserSliceReader,
};
use metaroce_proto::constants::UDP_PORT;
use rdma::{
    device::Registry,
    netdev::{NetDevice, NetDeviceId},
    stats::CounterDesc,
    udp::{DatagramHandler, Destination, Ecn, Received, TunnelRef, UdpTunnel, UdpTunnels},
};

/// Most datagrams one write to the `xmit` file sends.
const XMIT_MAX_COUNT: u32 = 100_000;
/// Largest test payload (a jumbo frame's worth).
const XMIT_MAX_LEN: usize = 9000;
/// Default test payload length.
const XMIT_DEFAULT_LEN: usize = 64;

/// Counters of the device itself (datagrams, connections, UD), the first of
/// [`HW_COUNTERS`]; the transport's follow, then the namespace's.
const DEVICE_COUNTERS: usize = 28;
/// Counters of the device's namespace, before the per-QP ones (`crate::qp_stats`).
const NS_COUNTERS: usize = 3;

/// The port counters, in the order of [`DeviceNet::read_counters`].
pub(crate) const HW_COUNTERS: &[CounterDesc] = &[
    CounterDesc::new(c"rx_packets"),
    CounterDesc::new(c"rx_bytes"),
    CounterDesc::new(c"rx_not_ect"),
    CounterDesc::new(c"rx_ect0"),
    CounterDesc::new(c"rx_ect1"),
    CounterDesc::new(c"rx_ce"),
    CounterDesc::new(c"tx_packets"),
    CounterDesc::new(c"tx_bytes"),
    CounterDesc::new(c"tx_errors"),
    CounterDesc::new(c"tx_zero_copy"),
    CounterDesc::new(c"tx_gso_bursts"),
    CounterDesc::new(c"tx_gso_segments"),
    // The transport engine: connections (one per peer) and the QPs they carry.
    CounterDesc::new(c"conns_open"),
    CounterDesc::new(c"conns_opened"),
    CounterDesc::new(c"qps_bound"),
    CounterDesc::new(c"rx_no_conn"),
    CounterDesc::new(c"rx_bad_header"),
    CounterDesc::new(c"rx_wrong_peer"),
    CounterDesc::new(c"rx_late_open"),
    CounterDesc::new(c"conns_peer_closed"),
    CounterDesc::new(c"conns_peer_gone"),
    CounterDesc::new(c"conn_probes"),
    CounterDesc::new(c"rx_wrong_src"),
    CounterDesc::new(c"rx_open_limited"),
    CounterDesc::new(c"conns_refused"),
    // Unreliable datagrams (crate::ud).
    CounterDesc::new(c"ud_tx"),
    CounterDesc::new(c"ud_rx"),
    CounterDesc::new(c"ud_rx_dropped"),
    // Summed over the connections (crate::engine::TRANSPORT_COUNTERS).
    CounterDesc::new(c"tx_data"),
    CounterDesc::new(c"tx_retransmits"),
    CounterDesc::new(c"rto_expired"),
    CounterDesc::new(c"rto_spurious"),
    CounterDesc::new(c"tx_acks"),
    CounterDesc::new(c"tx_naks"),
    CounterDesc::new(c"rx_duplicates"),
    CounterDesc::new(c"rx_dropped"),
    CounterDesc::new(c"rx_out_of_window"),
    CounterDesc::new(c"rx_no_qp"),
    CounterDesc::new(c"rx_wrong_conn"),
    CounterDesc::new(c"rx_inbox_full"),
    CounterDesc::new(c"conn_runs"),
    // Per namespace: shared by the devices of the device's namespace.
    CounterDesc::new(c"ns_rx_no_device"),
    CounterDesc::new(c"ns_rx_malformed"),
    CounterDesc::new(c"ns_tx_no_route"),
    // Per QP, in the order of `QpCounters::read` (0 here: see rdma::counter).
    CounterDesc::new(c"qp_tx_data"),
    CounterDesc::new(c"qp_tx_bytes"),
    CounterDesc::new(c"qp_tx_retransmits"),
    CounterDesc::new(c"qp_rx_data"),
    CounterDesc::new(c"qp_rx_bytes"),
    CounterDesc::new(c"qp_rem_errors"),
    CounterDesc::new(c"qp_retry_exceeded"),
    CounterDesc::new(c"qp_req_refused"),
];

/// Datagram counters of one device.
pub(crate) struct NetCounters {
    rx_packets: Atomic<u64>,
    rx_bytes: Atomic<u64>,
    /// Per ECN codepoint, indexed by its value.
    rx_ecn: [Atomic<u64>; 4],
    tx_packets: Atomic<u64>,
    tx_bytes: Atomic<u64>,
    tx_errors: Atomic<u64>,
    /// Sent datagrams whose payload rode as memory-region pages, not copied.
    tx_zero_copy: Atomic<u64>,
    /// Sent buffers that carried more than one datagram (UDP GSO bursts).
    tx_gso_bursts: Atomic<u64>,
    /// The datagrams those carried.
    tx_gso_segments: Atomic<u64>,
}

impl NetCounters {
    fn new() -> Self {
        Self {
            rx_packets: Atomic::new(0),
            rx_bytes: Atomic::new(0),
            rx_ecn: [const { Atomic::new(0) }; 4],
            tx_packets: Atomic::new(0),
            tx_bytes: Atomic::new(0),
            tx_errors: Atomic::new(0),
            tx_zero_copy: Atomic::new(0),
            tx_gso_bursts: Atomic::new(0),
            tx_gso_segments: Atomic::new(0),
        }
    }

    pub(crate) fn count_rx(&self, ecn: Ecn, len: usize) {
        self.rx_packets.fetch_add(1, Relaxed);
        self.rx_bytes.fetch_add(len as u64, Relaxed);
        self.rx_ecn[ecn as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn count_tx(&self, ret: Result, len: usize) {
        self.count_tx_paged(ret, len, false);
    }

    /// Counts the transmission of a burst of `packets` datagrams of `len` bytes in all,
    /// `zero_copy` of them with a paged payload, sent as one buffer (UDP GSO) when
    /// `packets > 1`.
    pub(crate) fn count_tx_burst(&self, ret: Result, packets: usize, len: usize, zero_copy: usize) {
        if ret.is_ok() {
            self.tx_zero_copy.fetch_add(zero_copy as u64, Relaxed);
            self.tx_packets.fetch_add(packets as u64, Relaxed);
            self.tx_bytes.fetch_add(len as u64, Relaxed);
            if packets > 1 {
                self.tx_gso_bursts.fetch_add(1, Relaxed);
                self.tx_gso_segments.fetch_add(packets as u64, Relaxed);
            }
        } else {
            self.tx_errors.fetch_add(packets as u64, Relaxed);
        }
    }

    /// Counts a transmission whose payload was paged (`zero_copy`) or not.
    pub(crate) fn count_tx_paged(&self, ret: Result, len: usize, zero_copy: bool) {
        if ret.is_ok() && zero_copy {
            self.tx_zero_copy.fetch_add(1, Relaxed);
        }
        if ret.is_ok() {
            self.tx_packets.fetch_add(1, Relaxed);
            self.tx_bytes.fetch_add(len as u64, Relaxed);
        } else {
            self.tx_errors.fetch_add(1, Relaxed);
        }
    }
}

/// Hands received datagrams to the device of their ingress netdev.
#[pin_data]
pub(crate) struct Demux {
    /// The devices' engines by netdev; taken in softirq context, hence IRQ-safe.
    #[pin]
    devices: SpinLockIrq<KVec<(NetDeviceId, Arc<Engine>)>>,
}

impl Demux {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devices <- new_spinlock_irq!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    fn insert(&self, netdev: NetDeviceId, engine: Arc<Engine>) -> Result {
        self.devices.lock().push((netdev, engine), GFP_ATOMIC)?;
        Ok(())
    }

    fn remove(&self, engine: &Arc<Engine>) {
        let removed = {
            let mut devices = self.devices.lock();
            let i = devices.iter().position(|(_, e)| Arc::ptr_eq(e, engine));
            i.and_then(|i| devices.remove(i).ok())
        };
        // The `Arc` is dropped here, outside the lock.
        drop(removed);
    }
}

impl DatagramHandler for Demux {
    fn on_datagram(&self, rx: Received<'_>) {
        let id = rx.netdev().id();
        let engine = self
            .devices
            .lock()
            .iter()
            .find(|(d, _)| *d == id)
            .map(|(_, e)| e.clone());
        match engine {
            Some(e) => e.receive(rx),
            None => rx.discard_unclaimed(),
        }
    }
}

/// What the devices share: the tunnel registry and the debugfs directory.
pub(crate) struct NetContext {
    tunnels: Arc<UdpTunnels<Demux>>,
    debugfs: Dir,
}

impl NetContext {
    /// Creates the tunnel registry for [`UDP_PORT`] (no socket yet) and
    /// `/sys/kernel/debug/metaroce/`.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            tunnels: UdpTunnels::new(UDP_PORT, Demux::new()?)?,
            debugfs: Dir::new(c"metaroce"),
        })
    }
}

/// The network state of one device.
pub(crate) struct DeviceNet {
    counters: Arc<NetCounters>,
    engine: Arc<Engine>,
    tunnel: TunnelRef<Demux>,
    _xmit: Pin<KBox<debugfs::File<DeviceLookup>>>,
    _conns: Pin<KBox<debugfs::File<DeviceLookup>>>,
    _paths: Pin<KBox<debugfs::File<DeviceLookup>>>,
    _dir: Dir,
}

impl DeviceNet {
    /// Opens the tunnel of `netdev`'s namespace for the device `name` and creates its
    /// `xmit` file.
    pub(crate) fn new(
        ctx: &NetContext,
        registry: &Arc<Registry<MetaRoceDriver>>,
        netdev: &NetDevice,
        name: &CStr,
    ) -> Result<Self> {
        let counters = Arc::new(NetCounters::new(), GFP_KERNEL)?;
        let engine = Engine::new(registry.clone(), netdev, counters.clone())?;
        let tunnel = ctx.tunnels.open(netdev)?;
        let dir = ctx.debugfs.subdir(name);
        let xmit = KBox::pin_init(
            dir.write_callback_file(
                c"xmit",
                DeviceLookup {
                    registry: registry.clone(),
                    netdev: netdev.id(),
                },
                &xmit_write,
            ),
            GFP_KERNEL,
        )?;
        let conns = KBox::pin_init(
            dir.read_callback_file(
                c"conns",
                DeviceLookup {
                    registry: registry.clone(),
                    netdev: netdev.id(),
                },
                &conns_show,
            ),
            GFP_KERNEL,
        )?;
        let paths = KBox::pin_init(
            dir.read_callback_file(
                c"paths",
                DeviceLookup {
                    registry: registry.clone(),
                    netdev: netdev.id(),
                },
                &paths_show,
            ),
            GFP_KERNEL,
        )?;
        // Last, so that nothing fails after the device can receive.
        tunnel.handler().insert(netdev.id(), engine.clone())?;
        Ok(Self {
            counters,
            engine,
            tunnel,
            _xmit: xmit,
            _conns: conns,
            _paths: paths,
            _dir: dir,
        })
    }

    /// The device's transport engine.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The UDP tunnel of the device's namespace.
    pub(crate) fn tunnel(&self) -> &UdpTunnel<Demux> {
        &self.tunnel
    }

    /// Counts a transmission's outcome.
    pub(crate) fn count_tx(&self, ret: Result, len: usize) {
        self.counters.count_tx(ret, len);
    }

    /// Counts a burst's outcome ([`NetCounters::count_tx_burst`]).
    pub(crate) fn count_tx_burst(&self, ret: Result, packets: usize, len: usize, zero_copy: usize) {
        self.counters.count_tx_burst(ret, packets, len, zero_copy);
    }

    /// Fills `values` in the order of [`HW_COUNTERS`].
    pub(crate) fn read_counters(&self, values: &mut [u64]) {
        let c = &self.counters;
        let e = &self.engine;
        let t = e.transport_counters();
        let ns = self.tunnel.stats();
        let device: [u64; DEVICE_COUNTERS] = [
            c.rx_packets.load(Relaxed),
            c.rx_bytes.load(Relaxed),
            c.rx_ecn[Ecn::NotEct as usize].load(Relaxed),
            c.rx_ecn[Ecn::Ect0 as usize].load(Relaxed),
            c.rx_ecn[Ecn::Ect1 as usize].load(Relaxed),
            c.rx_ecn[Ecn::Ce as usize].load(Relaxed),
            c.tx_packets.load(Relaxed),
            c.tx_bytes.load(Relaxed),
            c.tx_errors.load(Relaxed),
            c.tx_zero_copy.load(Relaxed),
            c.tx_gso_bursts.load(Relaxed),
            c.tx_gso_segments.load(Relaxed),
            e.conns() as u64,
            e.stats.conns_opened.load(Relaxed),
            e.stats.qps_bound.load(Relaxed),
            e.stats.rx_no_conn.load(Relaxed),
            e.stats.rx_bad_header.load(Relaxed),
            e.stats.rx_wrong_peer.load(Relaxed),
            e.stats.rx_late_open.load(Relaxed),
            e.stats.conns_peer_closed.load(Relaxed),
            e.stats.conns_peer_gone.load(Relaxed),
            e.stats.conn_probes.load(Relaxed),
            e.stats.rx_wrong_src.load(Relaxed),
            e.stats.rx_open_limited.load(Relaxed),
            e.stats.conns_refused.load(Relaxed),
            e.stats.ud_tx.load(Relaxed),
            e.stats.ud_rx.load(Relaxed),
            e.stats.ud_rx_dropped.load(Relaxed),
        ];
        let namespace = [ns.rx_unclaimed, ns.rx_malformed, ns.tx_no_route];
        const _: () = assert!(
            HW_COUNTERS.len()
                == DEVICE_COUNTERS + TRANSPORT_COUNTERS + NS_COUNTERS + crate::qp_stats::COUNT
        );
        // `Iterator::` spelled out: pin-init's `Init::chain` applies to every type.
        let all = Iterator::chain(Iterator::chain(device.into_iter(), t), namespace);
        for (v, a) in values.iter_mut().zip(all) {
            *v = a;
        }
    }

    /// Sends `count` test datagrams of `len` bytes to `dst` on [`UDP_PORT`], ECT(0), from
    /// source ports `src_port`, `src_port + 1`, ... (skipping 0), through `netdev`.
    /// Returns the first error after trying all of them.
    fn xmit_test(
        &self,
        netdev: &NetDevice,
        dst: IpAddr,
        src_port: u16,
        count: u32,
        len: usize,
    ) -> Result {
        let src = match dst {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let mut payload = KVec::with_capacity(len, GFP_KERNEL)?;
        for i in 0..len {
            payload.push(b"MetaRoCE-test "[i % 14], GFP_KERNEL)?;
        }
        let mut first_err = Ok(());
        for i in 0..count {
            // Source ports cycle through 1..=65535.
            let port = (u32::from(src_port).saturating_sub(1) + i) % 65535 + 1;
            let to = Destination {
                src,
                dst,
                src_port: port as u16,
                dst_port: UDP_PORT,
                ecn: Ecn::Ect0,
            };
            let ret = self.tunnel.send_slice(netdev, &to, &payload, GFP_KERNEL);
            self.counters.count_tx(ret, len);
            if first_err.is_ok() {
                first_err = ret;
            }
        }
        first_err
    }
}

impl Drop for DeviceNet {
    fn drop(&mut self) {
        self.tunnel.handler().remove(&self.engine);
        self.engine.shutdown_all();
    }
}

/// The data of a device's debugfs files: how to find the device.
struct DeviceLookup {
    registry: Arc<Registry<MetaRoceDriver>>,
    netdev: NetDeviceId,
}

/// Writing `DST_IP SRC_PORT COUNT [LEN]` to `/sys/kernel/debug/metaroce/DEV/xmit` sends
/// COUNT test datagrams (see [`DeviceNet::xmit_test`]).
fn xmit_write(file: &DeviceLookup, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 128];
    let n = reader.len();
    if n >= buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    let text = core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?;
    let mut words = text.split_ascii_whitespace();
    let dst = IpAddr::from_str(words.next().ok_or(EINVAL)?).map_err(|_| EINVAL)?;
    let src_port: u16 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    let count: u32 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    let len: usize = match words.next() {
        Some(w) => w.parse().map_err(|_| EINVAL)?,
        None => XMIT_DEFAULT_LEN,
    };
    if words.next().is_some() || src_port == 0 || count > XMIT_MAX_COUNT || len > XMIT_MAX_LEN {
        return Err(EINVAL);
    }
    let dev = file.registry.get_by_netdev(file.netdev).ok_or(ENODEV)?;
    let netdev = dev.netdev().ok_or(ENODEV)?;
    dev.data()
        .net()
        .xmit_test(&netdev, dst, src_port, count, len)
}

/// Reading `/sys/kernel/debug/metaroce/DEV/conns` shows the state of the device's
/// connections: each one's execution context, protocol core and bound QPs (see
/// Documentation/metaroce/driver.rst, "Troubleshooting").
fn conns_show(file: &DeviceLookup, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match file.registry.get_by_netdev(file.netdev) {
        Some(dev) => dev.data().net().engine().write_conns(f),
        None => writeln!(f, "no device"),
    }
}

/// Reading `/sys/kernel/debug/metaroce/DEV/paths` shows each open connection's rate
/// hints and the state of each of its paths, one line each (see
/// Documentation/metaroce/driver.rst, "Paths").
fn paths_show(file: &DeviceLookup, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match file.registry.get_by_netdev(file.netdev) {
        Some(dev) => dev.data().net().engine().write_paths(f),
        None => writeln!(f, "no device"),
    }
}
